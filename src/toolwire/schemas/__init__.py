"""Provider dialects of tool schemas, and what a provider's refusal means."""

from .dialects import DIALECTS, to_dialect
from .refusals import classify_refusal

__all__ = ["DIALECTS", "classify_refusal", "to_dialect"]
