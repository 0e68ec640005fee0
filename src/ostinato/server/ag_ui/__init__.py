"""The AG-UI surface: ``POST /v1/ag-ui`` runs an agent for a front end that speaks AG-UI
(CopilotKit and others) and streams the run's events (``translate``: frames to events;
``route``: the run input, the thread, what resumes an interrupt). It reaches the loop
only through the runtime and keeps nothing of its own: a run is a turn, a thread a
conversation, an interrupt an approval or a question card."""

from ostinato.server.ag_ui.route import router

__all__ = ["router"]
