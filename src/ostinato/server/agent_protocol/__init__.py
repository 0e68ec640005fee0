"""The Agent Protocol (LangGraph's server API) under ``/langgraph``: what the
``langgraph-sdk`` clients (Python, and ``@langchain/langgraph-sdk`` with its ``useStream``)
call, with their URL naming ``http://HOST/langgraph``.

``wire`` writes the protocol's shapes (threads, assistants, states, LangChain messages,
interrupts), ``threads`` serves assistants and threads, ``starting`` starts what a run
asks, ``record`` keeps a run in the store, ``events`` streams it, ``runs`` serves runs
(``stateless``: runs without a thread, each in a new one), ``store_items`` the
namespaced store, ``crons`` crons (``cron_record``: their records and requests) on
ostinato's schedules.
It reaches the loop only through the runtime, as every other surface does.
"""

from fastapi import APIRouter

from ostinato.server.agent_protocol import crons, runs, stateless, store_items, threads

router = APIRouter()
router.include_router(threads.router)
router.include_router(runs.router)
router.include_router(stateless.router)
router.include_router(store_items.router)
router.include_router(crons.router)

__all__ = ["router"]
