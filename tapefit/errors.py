"""The one exception type tapefit raises for bad input; its message says what is wrong and how
to fix it, and the CLI prints it as a single line."""


class TapefitError(Exception):
    """A user-facing error: bad config, data or files. The message is one actionable line."""


class UnsaveableModelError(TapefitError, NotImplementedError):
    """A model whose `.keras` file would not load again, refused at save time; also a
    `NotImplementedError`, the type of Keras' own save-time refusal, so that code catching
    Keras' refusal catches tapefit's."""
