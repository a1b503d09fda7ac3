"""Reading one YAML mapping of a configuration file, with upstream's field.Error wording.

Every getter fails naming the exact field path (`profiles[0].pluginConfig[1].args.maxTaskTypes`)
in the words upstream's validation uses (`Invalid value: 0: must be greater than 0`). The file
parser (`config_parse`) and every plugin's args parser (in the plugin's own module) use it, so a
plugin's arguments are checked where the plugin is written.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Literal, NoReturn, TypeVar

from scheduler.core.objects import INT32_MAX, aggregate_error

GoInt = Literal["int32", "int64"]
GoFloat = Literal["float32", "float64"]
_GO_INT_RANGES: dict[GoInt, tuple[int, int]] = {"int32": (-(INT32_MAX + 1), INT32_MAX), "int64": (-(2**63), 2**63 - 1)}
_T = TypeVar("_T")


class FieldError(Exception):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


class BuildError(FieldError):
    """An error upstream's framework build reports (NewFramework: a plugin at a point it does not
    extend, a profile's queue sort count), not its validation: kube-scheduler builds the profiles'
    frameworks only once the whole file validated, one profile after another, and stops at the
    first error (`Checks.raise_validation_first`)."""


class FieldErrors(Exception):
    """Several fields' errors in the order found, printed as apimachinery's aggregate prints them
    (`aggregate_error`: "[a, b]", each distinct message once)."""

    def __init__(self, errors: list[FieldError]) -> None:
        self.errors = errors
        super().__init__(aggregate_error([f"{err.field}: {err.message}" if err.field else err.message
                                          for err in errors]))


class Checks:
    """Runs independent checks each on its own and keeps every error, as upstream's validation
    appends each one to its `field.ErrorList` and flattens the lists into one aggregate
    (`utilerrors.Flatten`): a check that fails is recorded and the next one runs. A nested
    `Checks` that raised `FieldErrors` adds all of its errors, in order. Checks that read a value
    an earlier one vouched for stay inside one call (they run only when it passed)."""

    def __init__(self) -> None:
        self.errors: list[FieldError] = []

    def read(self, read: Callable[[], _T], fallback: _T) -> _T:
        """`read()`, or `fallback` after recording why it failed."""
        try:
            return read()
        except FieldError as err:
            self.errors.append(err)
        except FieldErrors as errs:
            self.errors.extend(errs.errors)
        return fallback

    def check(self, check: Callable[[], object]) -> None:
        self.read(check, None)

    def record(self, error: FieldError) -> None:
        """An error found without a check to run (one of several a single value has)."""
        self.errors.append(error)

    def raise_errors(self) -> None:
        """One error as itself (its message as before), several as `FieldErrors`."""
        if len(self.errors) == 1:
            raise self.errors[0]
        if self.errors:
            raise FieldErrors(self.errors)

    def raise_validation_first(self) -> None:
        """`raise_errors` for a whole file: its validation errors alone when it has any, else its
        first `BuildError`, as kube-scheduler reports a file that fails validation without building
        a framework, and the first profile whose framework fails, with that failure alone."""
        self.errors = [err for err in self.errors if not isinstance(err, BuildError)] or self.errors[:1]
        self.raise_errors()


class Verbatim(str):
    """A value printed as is in messages (Go prints durations unquoted)."""


def fmt(value: object) -> str:
    if isinstance(value, Verbatim):
        return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return repr(value)
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):  # e.g. a mapping with date or other non-string keys
        text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def go_json(value: object) -> Verbatim:
    """`value` as Go's json.Marshal writes it (compact), unshortened: how field errors print a
    list or a struct (kube-scheduler's `Invalid value: ["a","b"]`)."""
    return Verbatim(json.dumps(value, separators=(",", ":"), ensure_ascii=False))


def invalid(path: str, value: object, detail: str) -> NoReturn:
    raise invalid_error(path, value, detail)


def invalid_error(path: str, value: object, detail: str) -> FieldError:
    """field.Invalid's error, for `Checks.record`."""
    return FieldError(path, f"Invalid value: {fmt(value)}: {detail}")


def required(path: str, detail: str = "") -> NoReturn:
    raise FieldError(path, f"Required value: {detail}" if detail else "Required value")


def unsupported(path: str, value: object, supported: Iterable[str], note: str = "") -> NoReturn:
    """field.NotSupported: the valid values listed, when there are any; then `note` (why), if any."""
    listed = ", ".join(json.dumps(s) for s in supported)
    raise FieldError(path, f"Unsupported value: {fmt(value)}" + (f": supported values: {listed}" if listed else "")
                     + (f"; {note}" if note else ""))


def duplicate(path: str, value: object, detail: str = "") -> NoReturn:
    raise FieldError(path, f"Duplicate value: {fmt(value)}" + (f": {detail}" if detail else ""))


def forbidden(path: str, detail: str) -> NoReturn:
    raise FieldError(path, f"Forbidden: {detail}")


def child(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def go_int(path: str, value: object, go_type: GoInt) -> int:
    """`value` decoded into a Go `go_type` field as kube-scheduler decodes its file: YAML to JSON
    (sigs.k8s.io/yaml writes a whole float such as `20.0` or `1e3` as the integer), then
    encoding/json, which refuses a fraction, a non-number and a number outside the type's range
    (`json: cannot unmarshal number ... of type int32`)."""
    if isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, bool) or not isinstance(value, int):
        invalid(path, value, "must be an integer")
    else:
        number = value
    low, high = _GO_INT_RANGES[go_type]
    if not low <= number <= high:
        invalid(path, value, f"out of range of {go_type} [{low}, {high}]")
    return number


def type_name(value: object) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return "a string" if isinstance(value, str) else f"{fmt(value)}"


class ArgsReader:
    """A YAML mapping at a field path; getters fail naming that path. With `fold`, keys match
    case-insensitively (last one wins), as Go's encoding/json does."""

    def __init__(self, raw: object, path: str, *, fold: bool = False) -> None:
        if not isinstance(raw, dict):
            invalid(path, raw, f"must be a mapping, not {type_name(raw)}")
        self.path = path
        self.fold = fold
        self._data: dict[str, tuple[str, object]] = {}
        for key, value in raw.items():
            if not isinstance(key, str):
                invalid(child(path, str(key)), key, "field names must be strings")
            self._data[key.lower() if fold else key] = (key, value)

    def _key(self, key: str) -> str:
        return key.lower() if self.fold else key

    def at(self, key: str) -> str:
        """The field path of `key`, spelled as in the file when present."""
        entry = self._data.get(self._key(key))
        return child(self.path, entry[0] if entry else key)

    def raw(self, key: str) -> object:
        """The value, None when absent or null (Go decodes both to the zero value / nil)."""
        entry = self._data.get(self._key(key))
        return None if entry is None else entry[1]

    def check_keys(self, known: Collection[str], ignored: Collection[str] = (),
                   hints: Mapping[str, str] | None = None) -> None:
        allowed = {self._key(k) for k in (*known, *ignored)}
        for key, (original, _) in self._data.items():
            if key not in allowed:
                hint = (hints or {}).get(original)
                raise FieldError(child(self.path, original), f"unknown field ({hint})" if hint else
                                  f"unknown field; known fields: {', '.join(sorted(known))}")

    def get_int(self, key: str, default: int, go_type: GoInt = "int64") -> int:
        """An integer field of Go type `go_type` (upstream's, where the field is upstream's;
        Tessera's own are int64): see `go_int`."""
        value = self.raw(key)
        return default if value is None else go_int(self.at(key), value, go_type)

    def get_float(self, key: str, default: float, go_type: GoFloat = "float64") -> float:
        value = self.raw(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, (int, float)) or abs(value) > 1e300 \
                or not math.isfinite(value):
            invalid(self.at(key), value, "must be a number")
        if go_type == "float32":
            try:  # rounds to the nearest float32, as strconv.ParseFloat(s, 32); beyond its range: an error
                struct.pack("<f", value)
            except OverflowError:
                invalid(self.at(key), value, "out of range of float32")
        return float(value)

    def get_bool(self, key: str, default: bool) -> bool:
        value = self.raw(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            invalid(self.at(key), value, "must be true or false")
        return value

    def get_str(self, key: str, default: str) -> str:
        value = self.raw(key)
        if value is None:
            return default
        if not isinstance(value, str):
            invalid(self.at(key), value, "must be a string")
        return value

    def get_list(self, key: str) -> list[object]:
        value = self.raw(key)
        if value is None:
            return []
        if not isinstance(value, list):
            invalid(self.at(key), value, f"must be a list, not {type_name(value)}")
        return value

    def get_obj(self, key: str) -> ArgsReader | None:
        value = self.raw(key)
        return None if value is None else ArgsReader(value, self.at(key), fold=self.fold)

    def non_negative(self, key: str, default: int) -> int:
        value = self.get_int(key, default)
        if value < 0:
            invalid(self.at(key), value, "must be greater than or equal to 0")
        return value

    def positive(self, key: str, default: int) -> int:
        value = self.get_int(key, default)
        if value < 1:
            invalid(self.at(key), value, "must be greater than 0")
        return value
