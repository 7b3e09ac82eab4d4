#!/usr/bin/env bash
# The ladder's GCIDE token folder, data/gcide-bpe8k: scripts/prepare_corpus.sh gcide.
exec "$(dirname "$0")/prepare_corpus.sh" gcide "$@"
