"""Fails when a crate of the workspace declares a dependency its code never names.

For each crate (the library, the command line, the Python module) every `[dependencies]` name
must appear in that crate's sources, and every `[dev-dependencies]` name in its sources,
tests, benches or examples, as a path (`name::`), a `use name`, or a macro (`name!`). A
crate renamed with `package = ...` is looked up by its key. Run by `.ci/run`.
"""

import pathlib
import re
import sys
import tomllib

ROOT = pathlib.Path(__file__).resolve().parent.parent
CRATES = {
    "Cargo.toml": (["src"], ["tests", "benches", "examples", "dev"]),
    "cli/Cargo.toml": (["cli/src"], ["cli/tests"]),
    "python/Cargo.toml": (["python/src"], []),
}


def sources(folders):
    text = []
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.rs")) if (ROOT / folder).is_dir() else []:
            text.append(path.read_text(encoding="utf-8"))
    return "\n".join(text)


def used(name, text):
    ident = re.escape(name.replace("-", "_"))
    return re.search(rf"(?<![\w:])(::)?{ident}(::|!|\s*;|\s+as\b|\s*\{{)", text) is not None


def main():
    missing = []
    for manifest, (main_dirs, dev_dirs) in CRATES.items():
        table = tomllib.loads((ROOT / manifest).read_text(encoding="utf-8"))
        main_text = sources(main_dirs)
        for name in table.get("dependencies", {}):
            if not used(name, main_text):
                missing.append(f"{manifest}: [dependencies] {name}")
        dev_text = main_text + sources(dev_dirs)
        for name in table.get("dev-dependencies", {}):
            if not used(name, dev_text):
                missing.append(f"{manifest}: [dev-dependencies] {name}")
    for line in missing:
        print(f"unused dependency: {line} (remove it from the manifest)", file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
