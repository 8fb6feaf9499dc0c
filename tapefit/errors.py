"""The one exception type tapefit raises for bad input; its message says what is wrong and how
to fix it, and the CLI prints it as a single line."""


class TapefitError(Exception):
    """A user-facing error: bad config, data or files. The message is one actionable line.

    tapefit raises it for input it refuses, never for its own bugs: the message names the
    config key, file or value that is wrong and says how to fix it, and the CLI prints it as
    one line without a traceback. It is raised like any exception, with that message.

    Examples:
        >>> import tapefit
        >>> from tapefit.data.loaders import digits
        >>> try:
        ...     digits(val_fraction=1.5)
        ... except tapefit.TapefitError as error:
        ...     print(error)
        data.val_fraction=1.5 must lie strictly between 0 and 1
    """


class UnsaveableModelError(TapefitError, NotImplementedError):
    """A model whose `.keras` file would not load again, refused at save time.

    `TapeModel.save` raises it before writing anything, so no file exists that fails only
    when it is loaded. It is also a `NotImplementedError`, the type of Keras' own save-time
    refusal, so that code catching Keras' refusal catches tapefit's.

    Examples:
        >>> import tapefit
        >>> issubclass(tapefit.UnsaveableModelError, NotImplementedError)
        True
    """
