"""The registry of idle-gated jobs: each by name, built with its settings
(``[background.jobs]``); the names are the settings' sections and ``/v1/jobs``'s."""

from __future__ import annotations

from ostinato.background.jobs import Job
from ostinato.config.background import JobsSection
from ostinato.memory.consolidation import ConsolidateJob
from ostinato.memory.episodes import EpisodesJob
from ostinato.memory.lapse import LapseJob

NAMES = ("consolidate", "lapse", "episodes")


def default_jobs(settings: JobsSection) -> list[Job]:
    """Every job, in the order a tick runs them."""
    return [ConsolidateJob(), LapseJob(settings.lapse.stale_days), EpisodesJob()]
