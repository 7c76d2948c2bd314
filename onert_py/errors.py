"""One exception hierarchy for everything onert-py raises on purpose."""


class OnertPyError(Exception):
    """Base of every error onert-py raises deliberately."""


class LoadError(OnertPyError, ValueError):
    """The model file is malformed, hostile or not a TFLite/Circle model."""


class UnsupportedOpError(OnertPyError, NotImplementedError):
    """An operation has no kernel in any enabled backend (raised at prepare time)."""


class InputError(OnertPyError, ValueError):
    """Wrong number, dtype or shape of inputs given to a model."""


class ExecutionError(OnertPyError, RuntimeError):
    """A kernel failed while running, or a run-time limit was exceeded."""


class PrepareError(OnertPyError, ValueError):
    """An operation's static information is inconsistent (checked before running)."""


class ShapeInferenceError(PrepareError):
    """An op's input shapes contradict each other or its parameters (a bad resize, a broken model)."""


class GradientError(OnertPyError, ValueError):
    """A gradient that cannot be built: an op on the path without a gradient rule (named with its
    subgraph and index), an unknown `wrt` name, a rule refusing its op's configuration."""
