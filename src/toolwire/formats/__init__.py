"""Tool-call grammars, one module per model family."""
