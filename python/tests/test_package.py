"""``import orthoformer`` gives its submodules (``orthoformer.torch`` on first use), and a
machine without PyTorch gets one line saying what to install."""

from __future__ import annotations

import subprocess
import sys


def test_import_exposes_submodules() -> None:
    code = (
        "import orthoformer\n"
        "assert orthoformer.init.orthogonal(4, 2).shape == (4, 2)\n"
        "assert orthoformer.checkpoint.load_checkpoint is orthoformer.load_checkpoint\n"
        "import sys; assert 'orthoformer.torch' not in sys.modules\n"
        "assert orthoformer.torch.GPT.__name__ == 'GPT' and orthoformer.torch.nn.OrthogonalAttention\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


def test_missing_torch_is_one_clear_line() -> None:
    code = "import sys; sys.modules['torch'] = None\nimport orthoformer\northoformer.init\n"
    code += "import orthoformer.torch\n"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode == 1
    assert p.stderr.strip().splitlines()[-1] == (
        "ImportError: orthoformer.torch needs PyTorch: pip install 'torch>=2.1' safetensors "
        "(or, from the repository root, pip install './python[torch]')"
    )
