"""Custom-circuit uploads: streamed to disk with a running byte count, then sniffed.

The limit is enforced twice: on the declared Content-Length before a byte is read, and on
the bytes actually received (a client may lie or send chunked), so nothing over the limit is
ever held in memory or written whole. Each file's SHA-256 is computed on the way through; the
digests are the job's inputs, so resubmitting the same files is recognised as the same
request.

What the files hold is checked afterwards, in full, by the prover's readers
(engine.prover.custom); their FormatError becomes a 400 naming the file.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.core.files.uploadhandler import FileUploadHandler, SkipFile
from py_ecc import bn128
from py_ecc import optimized_bls12_381 as bls

from engine.api.errors import ApiError
from engine.circuits import job_folder
from engine.env import parse_size
from engine.states import Curve

UPLOAD_FIELDS = ("zkey", "wtns")
# The names the engine reads a custom circuit from (engine/synthesize.py).
STORED_NAMES = {"zkey": job_folder.ZKEY, "wtns": job_folder.WTNS}
# A custom upload may also bring the circuit's .r1cs: then the witness is checked against
# it at upload (engine.prover.formats.r1cs). Kept beside the key; the engine does not need it.
CUSTOM_NAMES = {**STORED_NAMES, "r1cs": job_folder.R1CS}
# (base field q, scalar field r) of each curve a snarkjs file can be over.
CURVES: dict[str, tuple[int, int]] = {
    Curve.BN254: (int(bn128.field_modulus), int(bn128.curve_order)),
    Curve.BLS12_381: (int(bls.field_modulus), int(bls.curve_order)),
}
# A registered circuit's circom symbol table, as stored beside its key, and its main
# component's signal names, taken from the .sym once at registration.
SYM_NAME = "circuit.sym"
NAMES_FILE = "signal_names.json"


class StorageFull(OSError):
    """A file part could not be written: the disk holding ``directory`` is full (or the write
    failed otherwise, ``errno`` says how). ``field`` names the part being written. The API
    answers a full disk with 507 (engine.api.errors)."""

    def __init__(self, cause: OSError, directory: Path, field: str | None) -> None:
        super().__init__(cause.errno, cause.strerror, str(directory))
        self.field = field


class UploadTooLarge(Exception):
    def __init__(self, limit: int) -> None:
        super().__init__(f"the upload is larger than the limit of {limit} bytes")
        self.limit = limit


class StagedFile(UploadedFile):
    """What the handler hands Django for a streamed file: where it is, its size and digest.
    An UploadedFile with no open file: the bytes are already on disk at ``path``."""

    def __init__(self, field: str, path: Path, size: int, sha256: str, name: str) -> None:
        super().__init__(file=None, name=name, size=size)
        self.field, self.path, self.sha256 = field, path, sha256

    def close(self) -> None:  # Django closes request files after the response; ours are closed
        pass


class StreamingLimitHandler(FileUploadHandler):
    """Writes the named file parts straight into ``staging`` (``names``: form field → stored
    file name; a custom job's zkey and wtns by default) and refuses more than ``limit`` bytes."""

    def __init__(self, staging: Path, limit: int, request: Any = None,
                 names: Mapping[str, str] = STORED_NAMES) -> None:
        super().__init__(request)
        self.staging, self.limit, self.names = staging, limit, names
        self.received = 0
        self._out: IO[bytes] | None = None
        self._hash: Any = None
        self._seen: set[str] = set()

    def handle_raw_input(self, input_data: Any, META: Any, content_length: int, boundary: Any,
                         encoding: str | None = None) -> None:
        if content_length and content_length > self.limit:
            raise UploadTooLarge(self.limit)

    def new_file(self, field_name: str, file_name: str, *args: Any, **kwargs: Any) -> None:
        super().new_file(field_name, file_name, *args, **kwargs)
        if field_name not in self.names or field_name in self._seen:
            raise SkipFile()  # one file per named field; anything else is not stored
        self._seen.add(field_name)
        try:
            self.staging.mkdir(parents=True, exist_ok=True)
            self._out = open(self.staging / self.names[field_name], "wb")  # noqa: SIM115 closed in file_complete
        except OSError as exc:
            raise self._failed(exc) from None
        self._hash = hashlib.sha256()

    def receive_data_chunk(self, raw_data: bytes, start: int) -> None:
        self.received += len(raw_data)
        if self.received > self.limit:
            self._close()
            raise UploadTooLarge(self.limit)
        assert self._out is not None
        try:
            self._out.write(raw_data)
        except OSError as exc:
            raise self._failed(exc) from None
        self._hash.update(raw_data)
        return None

    def file_complete(self, file_size: int) -> StagedFile | None:
        if self._out is None:
            return None
        path = Path(self._out.name)
        try:
            self._close()  # the last buffered bytes are written here: the disk may be full by now
        except OSError as exc:
            raise self._failed(exc) from None
        return StagedFile(self.field_name, path, file_size, self._hash.hexdigest(), str(self.file_name or ""))

    def upload_interrupted(self) -> None:
        self._close()

    def _close(self) -> None:
        if self._out is not None:
            out, self._out = self._out, None
            out.close()

    def _failed(self, exc: OSError) -> StorageFull:
        """After a write error: the part's file closed (an open descriptor keeps a deleted
        file's blocks) and removed, and the error that names where it was going."""
        out, self._out = self._out, None
        if out is not None:
            try:
                out.close()
            except OSError:
                pass  # the flush failed as the write did; the descriptor is closed all the same
            Path(out.name).unlink(missing_ok=True)
        return StorageFull(exc, self.staging, self.field_name)


def discard(staging: Path) -> None:
    shutil.rmtree(staging, ignore_errors=True)


def checked_upload(request: Any, expects: str) -> int:
    """The upload limit, once the request's declared size is within it and its body is
    multipart; otherwise the 413 or 400 that says why (``expects`` names the parts wanted)."""
    limit = parse_size(str(settings.PROVINGSITE["UPLOAD_LIMIT"]))
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        raise ApiError(400, "invalid", "Content-Length", "is not a number") from None
    if declared > limit:
        raise ApiError(413, "too_large", "body", f"uploads are limited to {limit} bytes; this one declares {declared}")
    if request.content_type != "multipart/form-data":
        raise ApiError(400, "invalid", "body", f"must be multipart/form-data with {expects}")
    return limit
