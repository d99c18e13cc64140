"""The TALLY_PROMETHEUS_CLIENT switch at interpreter start: a meta-path
finder that waits for the application's own import of prometheus_client.

tally-prometheus-client.pth imports this module (and calls install())
only when the variable is set.  It imports nothing but sys, which every
interpreter has already imported, so that the scripts, pip and build
tools that run with the variable in their environment start as fast as
without it.  When an import of prometheus_client begins, the finder
lets the finders after it find the module, then wraps the loader so
that, once prometheus_client's own code has run, tally_metrics is
imported and the switch engages (tally_metrics._backend.use()), before
the importing statement returns and so before the application makes a
metric.  The finder then leaves sys.meta_path, and the module's loader
is put back, so that what the application sees of prometheus_client is
what it would see without the switch.

The module sits at the top level of site-packages, not inside
tally_metrics, so that importing it does not import the package.
"""
import sys

_TARGET = "prometheus_client"


class _Loader:
    """prometheus_client's own loader, with the switch engaged after its
    module has run."""

    def __init__(self, loader):
        self._loader = loader

    def __getattr__(self, name):
        return getattr(self._loader, name)

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        spec = module.__spec__
        if spec is not None:
            spec.loader = self._loader
        module.__loader__ = self._loader
        self._loader.exec_module(module)
        _engage()


class _Finder:
    """Finds nothing itself: for prometheus_client, asks the finders
    after it and wraps the loader of what they find."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != _TARGET:
            return None
        uninstall()
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            if find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and \
                        hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader)
                return spec
        return None


_finder = _Finder()


def install():
    """Wait for the import of prometheus_client (nothing is imported
    now); if it is already imported, engage the switch at once."""
    if _TARGET in sys.modules:
        _engage()
    elif _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)


def uninstall():
    """Stop waiting (the finder leaves sys.meta_path)."""
    try:
        sys.meta_path.remove(_finder)
    except ValueError:
        pass


def _engage():
    # Whatever fails here, the application keeps running on
    # prometheus_client's own values: _from_environment() writes one line
    # on stderr and patches nothing when it cannot patch everything.
    try:
        from tally_metrics._backend import _from_environment
    except Exception as e:  # a broken install must not stop the app
        sys.stderr.write("tally: TALLY_PROMETHEUS_CLIENT is set but "
                         f"tally_metrics cannot be imported: {e}\n")
        return
    _from_environment()
