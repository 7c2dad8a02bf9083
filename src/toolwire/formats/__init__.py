"""Tool-call grammars, one module per model family.

The registry is imported with the package: it gathers what the families declare (their
thinking tags among it) and installs it in the shared machinery before any stream is made.
"""

from . import registry as registry
