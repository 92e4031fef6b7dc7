"""FormatError: a file refused, naming which file is at fault and saying why.

``field`` is the kind of file, as a client sends it ("zkey", "wtns", "r1cs", "wasm", "sym",
"proof", "public", "vk"): the web layer answers a 400 naming it, the command line prints the
message. Messages name no folder: they are shown to whoever sent the file.

Only the standard library: the command-line prover catches this and keeps numpy out of its
start-up.
"""

from __future__ import annotations


class FormatError(ValueError):
    """A file that is truncated, of the wrong kind, inconsistent, or not the circuit's."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message

    def __reduce__(self) -> tuple[type[FormatError], tuple[str, str]]:
        # An error raised in a worker process crosses back pickled; the default would rebuild
        # it from the message alone and lose the field.
        return (type(self), (self.field, self.message))

    def naming(self, name: str) -> FormatError:
        """The same error, its message led by the file's name (a reader's caller may hold
        several files of one kind, and the command line prints the message as it is)."""
        return FormatError(self.field, f"{name}: {self.message}")
