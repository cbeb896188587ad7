"""Executable claims: the API (:mod:`.api`), discovery, search, confirmation, verdicts, reports."""

from .api import ORIGINS, Claim, Outcome, claim

__all__ = ["ORIGINS", "Claim", "Outcome", "claim"]
