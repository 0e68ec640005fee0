"""Log formats (observe.logs): JSON lines carry the time, level, logger, event and,
during a turn, its conversation, run and owner; ``--log-format`` sets the setting."""

from __future__ import annotations

import io
import json
import logging
from types import SimpleNamespace

from ostinato.cli.main import build_parser, serve_overrides
from ostinato.config import load_config
from ostinato.observe import logs
from ostinato.observe.scopes import TurnScope


def record(message: str, level: int = logging.WARNING) -> logging.LogRecord:
    return logging.LogRecord("ostinato.test", level, __file__, 1, message, (), None)


def test_a_json_line_outside_a_turn() -> None:
    line = json.loads(logs.formatter("json").format(record("store slow: 12 ms")))
    assert line["level"] == "warning" and line["logger"] == "ostinato.test"
    assert line["event"] == "store slow: 12 ms"
    assert line["time"].endswith("+00:00")
    assert "conversation_id" not in line and "run_id" not in line


def test_a_json_line_during_a_turn_names_it() -> None:
    turn = SimpleNamespace(conversation_id="c1", run_id="r1", id="t1", kind="user")
    scope = TurnScope(None, turn, "ann")
    token = scope.attach()
    try:
        line = json.loads(logs.formatter("json").format(record("tool failed")))
    finally:
        scope.detach(token)
    assert (line["conversation_id"], line["run_id"], line["owner"]) == ("c1", "r1", "ann")


def test_an_exception_is_one_line_of_json() -> None:
    try:
        raise ValueError("bad\nthing")
    except ValueError:
        import sys

        rec = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", (), sys.exc_info())
    text = logs.formatter("json").format(rec)
    assert "\n" not in text and "ValueError" in json.loads(text)["exception"]


def test_configure_formats_the_stream_it_is_given() -> None:
    out = io.StringIO()
    root = logging.getLogger()
    level = root.level
    handler = logs.configure("json", stream=out)
    try:
        logging.getLogger("ostinato.test").info("hello %s", "there")
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    assert json.loads(out.getvalue().splitlines()[-1])["event"] == "hello there"


def test_the_flag_sets_the_setting() -> None:
    args = build_parser().parse_args(["serve", "--log-format", "json"])
    config = load_config(None, overrides=serve_overrides(args), env={})[0]
    assert config.observability.log_format == "json"
    assert load_config(None, env={})[0].observability.log_format == "plain"


def test_the_http_clients_request_lines_are_not_logged() -> None:
    out = io.StringIO()
    root = logging.getLogger()
    level = root.level
    before = {name: logging.getLogger(name).level for name in logs.QUIET}
    handler = logs.configure("plain", stream=out)
    try:
        logging.getLogger("httpx2").info('HTTP Request: POST http://model/v1 "200 OK"')
        logging.getLogger("httpx2").warning("a warning still shows")
        logging.getLogger("ostinato.test").info("ostinato's own info shows")
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
        for name, was in before.items():
            logging.getLogger(name).setLevel(was)
    text = out.getvalue()
    assert "HTTP Request" not in text
    assert "a warning still shows" in text and "ostinato's own info shows" in text
