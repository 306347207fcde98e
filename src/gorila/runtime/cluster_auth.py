"""Ray's token authentication as a driver joining a cluster meets it, through Ray's public
environment variables (``RAY_AUTH_MODE``, ``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH``; see
https://docs.ray.io/en/latest/ray-security/token-auth.html)::

    prefer_token_auth(os.environ)             # before Ray is imported (gorila.runtime.ray_calls does it)
    join_cluster("10.0.0.5:6379", "--address", timeout_s=10.0)   # ray.init(address=...), refusals in one line

Ray (2.5x) starts a cluster with token authentication when a token is at hand: an ``init`` that
starts a cluster of its own always, and ``ray start --head`` when ``~/.ray/auth_token`` exists, as it does
on any machine where an embedded Ray ran once. A driver given an address, though, sends its token
only with ``RAY_AUTH_MODE=token``, which Ray reads once, when it is imported: without it,
``gorila train --address`` met 20 s of ``InvalidAuthToken`` lines and a traceback.
:func:`prefer_token_auth` therefore sets ``RAY_AUTH_MODE=token`` where it is unset and a token is
at hand, as Ray itself does for ``ray start`` and for an ``init`` that starts its cluster (a cluster
without authentication ignores the token). A cluster that still refuses the driver (no token, or
another one) is told by :func:`check_authenticated` in one line that says what to set.
Imports no Ray at import (:func:`join_cluster` does, when called).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import MutableMapping
from pathlib import Path

from gorila.errors import ClusterUnreachableError
from gorila.runtime.ray_cwd import away_from_working_directory

MODE, TOKEN, TOKEN_PATH = "RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"
#: The first call a Ray driver makes to the cluster's GCS; asked alone, its status says whether the
#: GCS takes this driver's token (``UNAUTHENTICATED`` if not) before Ray's own connect retries it for 20 s.
_GCS_FIRST_CALL = "/ray.rpc.NodeInfoGcsService/GetClusterId"


class ClusterAuthError(ClusterUnreachableError):
    """The Ray cluster at the address given refuses this driver's authentication (no token, or
    another one than its own); the message says which variable to set."""


def token_source(environ: MutableMapping[str, str] | None = None) -> tuple[str, str] | None:
    """The token a Ray driver here would send, and where it comes from, as Ray looks for it:
    ``RAY_AUTH_TOKEN``, else the file ``RAY_AUTH_TOKEN_PATH`` names, else ``~/.ray/auth_token``;
    None when there is none."""
    environ = os.environ if environ is None else environ
    if environ.get(TOKEN, "").strip():
        return environ[TOKEN].strip(), TOKEN
    path = Path(environ[TOKEN_PATH]) if environ.get(TOKEN_PATH) else Path.home() / ".ray" / "auth_token"
    try:
        token = path.read_text().strip()
    except OSError:
        return None
    return (token, str(path)) if token else None


def prefer_token_auth(environ: MutableMapping[str, str] | None = None) -> bool:
    """Set ``RAY_AUTH_MODE=token`` where it is unset, a token is at hand (see the module doc) and
    Ray is not imported yet; whether the driver will send one. ``RAY_AUTH_MODE`` set by the user
    is left as it is."""
    environ = os.environ if environ is None else environ
    # Ray read the mode when it was imported: set now, it would reach only the processes this one
    # starts (an embedded Ray's GCS would ask for a token this driver never sends).
    if MODE not in environ and "ray" not in sys.modules and token_source(environ) is not None:
        environ[MODE] = "token"
    return environ.get(MODE, "").lower() == "token"


def check_authenticated(address: str, source: str, timeout_s: float) -> None:
    """Raise :class:`ClusterAuthError` if the Ray cluster at ``address`` (``HOST:PORT``; a
    ``ray://`` address is Ray Client's, which is left to Ray) refuses this driver's token. Any
    other answer, or none, is left to Ray's connect, which reports it."""
    if address.startswith("ray://") or address == "auto":
        return
    import grpc  # type: ignore[import-untyped]  # Ray's own dependency; only a join needs it

    sends = os.environ.get(MODE, "").lower() == "token"
    found = token_source() if sends else None
    metadata = [("authorization", f"Bearer {found[0]}")] if found else None
    try:
        with grpc.insecure_channel(address) as channel:
            call = channel.unary_unary(_GCS_FIRST_CALL, request_serializer=bytes, response_deserializer=bytes)
            call(b"", timeout=timeout_s, metadata=metadata)
    except grpc.RpcError as err:
        if err.code() == grpc.StatusCode.UNAUTHENTICATED:
            raise ClusterAuthError(refusal(address, source, sends, found)) from None


def refusal(address: str, source: str, sends: bool, found: tuple[str, str] | None) -> str:
    """The one line that says why the cluster refused this driver and what to set."""
    where = f"the Ray cluster at {address} (from {source}) asks for Ray's authentication token"
    fix = (f"set {TOKEN} to the head node's token (`ray get-auth-token` prints it there) or copy it to "
           f"~/.ray/auth_token ({TOKEN_PATH}: another file)")
    if found is not None:
        return f"{where} and refused the one in {found[1]}: {fix}"
    if sends or os.environ.get(MODE) is None:
        return f"{where} and this machine has none: {fix}"
    return f"{where} and {MODE}={os.environ[MODE]} sends none: set {MODE}=token and {fix}"


def join_cluster(address: str, source: str, timeout_s: float, verbose: bool = False) -> None:
    """Connect this driver to the Ray cluster at ``address`` (from ``source``: ``--address`` or
    ``RAY_ADDRESS``); a cluster that refuses its authentication is a :class:`ClusterAuthError`
    within ``timeout_s``, found by :func:`check_authenticated` first or, should that not see it,
    in what Ray's connect raised (after its retries)."""
    check_authenticated(address, source, timeout_s)
    import ray
    from ray.exceptions import AuthenticationError

    try:
        # Ray would put the directory the command was run in on the cluster's workers' import path (ray_cwd).
        with away_from_working_directory():
            ray.init(address=address, logging_level=logging.INFO if verbose else logging.ERROR,
                     log_to_driver=verbose)
    except (ConnectionError, RuntimeError) as err:
        cause: BaseException | None = err
        while cause is not None and not isinstance(cause, AuthenticationError):
            cause = cause.__cause__ or cause.__context__
        if cause is None:
            raise
        sends = os.environ.get(MODE, "").lower() == "token"
        raise ClusterAuthError(refusal(address, source, sends, token_source() if sends else None)) from None
