"""time(), count_exceptions() and track_inprogress(): context managers
that are decorators too, as prometheus_client's."""
from __future__ import annotations

import functools
import inspect
from timeit import default_timer
from typing import Any, Callable, Optional, Type, TypeVar, Union

F = TypeVar("F", bound=Callable[..., Any])


class _Decorator:
    def _new(self) -> "_Decorator":
        raise NotImplementedError

    def __call__(self, f: F) -> F:
        if inspect.iscoroutinefunction(f):
            @functools.wraps(f)
            async def awrapped(*args: Any, **kwargs: Any) -> Any:
                with self._new():
                    return await f(*args, **kwargs)
            return awrapped  # type: ignore[return-value]

        @functools.wraps(f)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            with self._new():
                return f(*args, **kwargs)
        return wrapped  # type: ignore[return-value]


class Timer(_Decorator):
    """Calls metric.<callback>(seconds elapsed) on exit."""

    def __init__(self, metric: Any, callback_name: str) -> None:
        self._metric = metric
        self._callback_name = callback_name
        self._start = 0.0

    def _new(self) -> "Timer":
        return Timer(self._metric, self._callback_name)

    def __enter__(self) -> "Timer":
        self._start = default_timer()
        return self

    def __exit__(self, typ: Any, value: Any, traceback: Any) -> None:
        duration = max(default_timer() - self._start, 0)
        getattr(self._metric, self._callback_name)(duration)

    def labels(self, *args: Any, **kw: Any) -> None:
        """Pick the child the time goes to (inside a with block)."""
        self._metric = self._metric.labels(*args, **kw)


class ExceptionCounter(_Decorator):
    def __init__(self, counter: Any,
                 exception: Union[Type[BaseException], tuple]) -> None:
        self._counter = counter
        self._exception = exception

    def _new(self) -> "ExceptionCounter":
        return self

    def __enter__(self) -> None:
        pass

    def __exit__(self, typ: Optional[type], value: Any,
                 traceback: Any) -> bool:
        if isinstance(value, self._exception):
            self._counter.inc()
        return False


class InprogressTracker(_Decorator):
    def __init__(self, gauge: Any) -> None:
        self._gauge = gauge

    def _new(self) -> "InprogressTracker":
        return self

    def __enter__(self) -> None:
        self._gauge.inc()

    def __exit__(self, typ: Any, value: Any, traceback: Any) -> None:
        self._gauge.dec()
