"""``torch.hub``'s helpers that programs import for other reasons: ``tqdm`` (the progress bar
PyTorch re-exports) and the cache directory. ferrograd downloads nothing:
:func:`load_state_dict_from_url` reads a file already in the cache directory (or a local
path) and raises otherwise."""

from __future__ import annotations

import functools
import os
from typing import Any


class _PlainTqdm:
    """A stand-in for ``tqdm.tqdm`` when tqdm is not installed: iterates, shows nothing."""

    def __init__(self, iterable: Any = None, *args: Any, **kwargs: Any) -> None:
        self.iterable = iterable
        self.n = 0

    def __iter__(self) -> Any:
        for x in self.iterable if self.iterable is not None else ():
            self.n += 1
            yield x

    def update(self, n: int = 1) -> None:
        self.n += n

    def set_description(self, *args: Any, **kwargs: Any) -> None:
        pass

    def set_postfix(self, *args: Any, **kwargs: Any) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def __getattr__(name: str) -> Any:
    # tqdm is imported on first use of hub.tqdm, never by `import ferrograd`
    if name == "tqdm":
        try:
            from tqdm import tqdm
        except ImportError:  # the bar is optional: iterate without one
            tqdm = _PlainTqdm
        globals()["tqdm"] = tqdm
        return tqdm
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_DIR: str | None = None


def get_dir() -> str:
    """The cache directory (``$TORCH_HOME/hub``, else ``~/.cache/torch/hub``, as PyTorch)."""
    if _DIR is not None:
        return _DIR
    home = os.environ.get("TORCH_HOME", os.path.join(os.path.expanduser("~"), ".cache", "torch"))
    return os.path.join(home, "hub")


def set_dir(d: str) -> None:
    global _DIR
    _DIR = os.fspath(d)


def load_state_dict_from_url(
    url: str,
    model_dir: str | None = None,
    map_location: Any = None,
    progress: bool = True,
    check_hash: bool = False,
    file_name: str | None = None,
    weights_only: bool = True,
) -> Any:
    """The state dict at ``url`` if it is already in the cache directory (or ``url`` is a
    local file): ferrograd does not download. Raises ``RuntimeError`` naming where to put
    the file otherwise."""
    from .serialization import load

    if os.path.exists(url):
        return load(url, map_location=map_location, weights_only=weights_only)
    d = model_dir or os.path.join(get_dir(), "checkpoints")
    path = os.path.join(d, file_name or os.path.basename(url.split("?")[0]))
    if os.path.exists(path):
        return load(path, map_location=map_location, weights_only=weights_only)
    raise RuntimeError(
        f"load_state_dict_from_url: ferrograd does not download; put the file from {url} at "
        f"{path} (or pass a local path)"
    )


class pretrained:
    """MegEngine's ``@hub.pretrained(url)`` decorator for a model-building function: the
    function gains a ``pretrained=False`` keyword; with ``pretrained=True`` the model it
    builds loads the state dict at ``url`` (which, as for :func:`load_state_dict_from_url`,
    must already be in the cache directory or be a local path: nothing is downloaded;
    MegEngine's published weights are pickles of numpy arrays, which load as they are)."""

    def __init__(self, url: str) -> None:
        self.url = url

    def __call__(self, func: Any) -> Any:
        url = self.url

        @functools.wraps(func)
        def build(pretrained: bool = False, **kwargs: Any) -> Any:
            model = func(**kwargs)
            if pretrained:
                model.load_state_dict(load_state_dict_from_url(url))
            return model

        return build


__all__ = ["get_dir", "load_state_dict_from_url", "pretrained", "set_dir", "tqdm"]  # noqa: F822 (lazy)
