"""What conform knows of its target, and how its plan sends.

Target  the facts every check may read: the resolved options, the model, the origin,
        and the requests the dialects build (generate, get). It sends nothing.
Sender  the one way a phase of the plan (phases.py) reaches the target: sequential
        requests on the control-plane client (`zqbench.target.control`); bursts on the
        load transport (loadclient.py) record theirs here too: every exchange is kept for
        headers.*.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from zqbench.conform.evidence import Evidence, Recorder, Request
from zqbench.conform.hung import OutOfTime
from zqbench.conform.options import ConformOptions
from zqbench.dialects import get_dialect
from zqbench.dialects.base import Dialect, DialectConfig, RequestSpec, Tools
from zqbench.target.control import ControlClient
from zqbench.transport.base import HttpRequest
from zqbench.transport.origin import Origin, parse_base_url

PROMPT = "Write a long story about a lighthouse keeper who counts ships."
MAX_SEEN = 5000  # exchanges kept for headers.* (bounded memory whatever the run does)


@dataclass(frozen=True, slots=True)
class Target:
    options: ConformOptions  # with the APIs resolved (runner._resolve)
    model: str = ""

    @property
    def origin(self) -> Origin:
        return parse_base_url(self.options.target)

    @property
    def base(self) -> str:
        return self.origin.url("")

    @property
    def api(self) -> str:
        """The dialect that drives errors.* and zeroqueue.* (the first of --api)."""
        return self.options.apis[0]

    def dialect(self, api: str | None = None) -> Dialect:
        """The dialect of `api` (default: `self.api`), sending the run's key."""
        return self.keyed(self.options.api_key, api)

    def keyed(self, api_key: str | None, api: str | None = None) -> Dialect:
        """The dialect of `api` (default: `self.api`), sending `api_key` (None: no key)."""
        return get_dialect(api or self.api, DialectConfig(model=self.model, api_key=api_key))

    def generate(
        self,
        api: str,
        *,
        stream: bool,
        max_tokens: int | None = None,
        tools: Tools | None = None,
        thinking_budget: int | None = None,
    ) -> Request:
        """A generation request, read by the dialect's parser when it is answered."""
        dialect = self.dialect(api)
        spec = RequestSpec(
            "conform",
            PROMPT,
            max_tokens or self.options.max_tokens,
            stream,
            tools=tools,
            thinking_budget=thinking_budget,
        )
        return Request(dialect.build(spec), lambda hook: dialect.parser(spec, on_event=hook))

    def get(self, path: str, api: str | None = None) -> Request:
        headers = self.dialect(api).headers
        return Request(
            HttpRequest("GET", path, tuple(h for h in headers if h[0] != "content-type"))
        )


@dataclass
class Sender:
    target: Target
    seen: list[Evidence] = field(default_factory=list)
    client: ControlClient = field(init=False)
    # time.monotonic() past which nothing more is sent (the run's bound); inf: none
    deadline: float = math.inf

    def __post_init__(self) -> None:
        self.client = ControlClient(timeout_s=self.target.options.timeout_s)

    def in_time(self) -> None:
        """OutOfTime once the run's bound has passed: the phase under way ends there."""
        if time.monotonic() >= self.deadline:
            o = self.target.options
            raise OutOfTime(o.duration_bound_s, o.timeout_s)

    def send(self, req: Request, client: ControlClient | None = None) -> Evidence:
        """One request on `client` (default: the run's), recorded for headers.*; OutOfTime
        past the run's bound."""
        self.in_time()
        rec = Recorder(req)
        ex = rec.finish((client or self.client).send(self.target.base, req.http, rec))
        self.record([ex])
        return ex

    def record(self, exchanges: list[Evidence]) -> None:
        """Exchanges sent on another transport (a burst's), kept for headers.*; OutOfTime
        past the run's bound, so that a phase of bursts ends there too."""
        room = MAX_SEEN - len(self.seen)
        self.seen.extend(exchanges[: max(0, room)])
        self.in_time()

    def close(self) -> None:
        self.client.close()
