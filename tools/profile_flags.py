#!/usr/bin/env python3
"""Regenerate a stack profile's `flags:` table from the SGLang release's own argparse parser.

    python tools/profile_flags.py <sglang wheel> <profile.yml>

Run it in a throwaway venv with only PyYAML, packaging, dill and msgspec (sglang 0.5.23's
ServerArgs is a msgspec struct; never the project's venv), on the release's wheel
(`pip download sglang==<version> --no-deps -d <dir>`): it unpacks the wheel into a temporary
directory, imports `sglang.srt.server_args` with every module that is not installed (torch,
transformers, ...) replaced by a permissive stub, calls `ServerArgs.add_cli_args()` on a fresh
`argparse.ArgumentParser` and writes every action (option strings, with the `--no-` forms of
BooleanOptionalAction; action; type; nargs; const; choices) as the `flags:` section at the end of the
profile, replacing the one there. Choices computed by the real code from its own constants are
resolved; a choices list that came from a stub is written as `<computed>` and named on stderr.
"""

from __future__ import annotations

import abc
import argparse
import hashlib
import importlib
import importlib.abc
import importlib.machinery
import shlex
import sys
import tempfile
import types
import zipfile
from pathlib import Path

import yaml

WIDTH = 118  # yamllint's line-length is 120
BUILTIN = {  # argparse's own actions, by the name `action=` takes
    argparse._StoreAction: "store",
    argparse._StoreTrueAction: "store_true",
    argparse._StoreFalseAction: "store_false",
    argparse._StoreConstAction: "store_const",
    argparse._AppendAction: "append",
    argparse._AppendConstAction: "append_const",
    argparse._CountAction: "count",
    argparse.BooleanOptionalAction: "BooleanOptionalAction",
}
# dunders a stub must not have: Python probes them to choose how to treat an object
PROTOCOL = {
    "__get__",
    "__set__",
    "__delete__",
    "__set_name__",
    "__wrapped__",
    "__signature__",
    "__origin__",
    "__args__",
    "__parameters__",
    "__dataclass_fields__",
    "__fspath__",
    "__code__",
    "__isabstractmethod__",
    "__class_getitem__",
    "__init_subclass__",
    "__getstate__",
}
# what a CUDA build of torch lacks (sglang tells the platform apart by hasattr(torch, "npu") etc.)
ABSENT = {"torch": {"npu", "hpu", "musa", "mlu"}}
IMPLIED_NARGS = {"store_true", "store_false", "store_const", "append_const", "count", "BooleanOptionalAction"}


class _StubMeta(abc.ABCMeta):
    """A stub class: any attribute is another stub, calling it gives a stub (or, as a decorator,
    the decorated function), and it can be subclassed, indexed, compared and iterated (empty).
    An ABCMeta, so that a class may derive from both a stub and an abc.ABC (sglang 0.5.23's
    arg groups do); `register` is the stub's own attribute, not ABCMeta's."""

    def __new__(mcs, name, bases, namespace, **kwargs):  # class keywords (total=False) go nowhere
        return super().__new__(mcs, name, bases, namespace)

    def __init__(cls, name, bases, namespace, **kwargs):
        super().__init__(name, bases, namespace)

    def __getattr__(cls, name):
        if name in PROTOCOL:
            raise AttributeError(name)
        return _stub(f"{cls.__qualname__}.{name}")

    def register(cls, *args, **kwargs):  # ABCMeta.register would make a stub a virtual superclass
        return _stub(f"{cls.__qualname__}.register")

    def __call__(cls, *args, **kwargs):
        if len(args) == 1 and not kwargs and callable(args[0]) and not isinstance(args[0], _StubMeta):
            return args[0]
        return _Value()

    def __getitem__(cls, item):
        return cls

    def __setitem__(cls, item, value):
        pass

    def __contains__(cls, item):
        return False

    def __or__(cls, other):
        return cls

    __ror__ = __and__ = __rand__ = __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __or__
    __truediv__ = __rtruediv__ = __floordiv__ = __mod__ = __pow__ = __matmul__ = __or__

    def __neg__(cls):
        return cls

    def __enter__(cls):
        return cls

    def __exit__(cls, *exc):
        return False

    def __iter__(cls):
        return iter(())

    def __len__(cls):
        return 0

    def __bool__(cls):
        return False

    def __int__(cls):
        return 0

    __index__ = __int__

    def __float__(cls):
        return 0.0

    def __lt__(cls, other):
        return False

    __le__ = __gt__ = __ge__ = __lt__

    def __eq__(cls, other):
        return cls is other

    def __hash__(cls):
        return id(cls)

    def __mro_entries__(cls, bases):
        return (cls,)


class _Value(str):
    """What calling a stub gives: an empty string (sglang uses call results as names, flags and
    tests) whose attributes are stubs and which can be called again."""

    def __getattr__(self, name):
        if name in PROTOCOL:
            raise AttributeError(name)
        return _Value()

    def __call__(self, *args, **kwargs):
        return _Value()

    def __lt__(self, other):
        return False

    __le__ = __gt__ = __ge__ = __lt__
    __hash__ = str.__hash__


def _stub(name):
    return _StubMeta(name, (), {"__module__": "stub", "__qualname__": name})


def is_stub(value):
    return isinstance(value, (_StubMeta, _Value))


class _StubModule(types.ModuleType):
    def __getattr__(self, name):
        if name in PROTOCOL or name in ("__path__", "__file__", "__all__") or name in ABSENT.get(self.__name__, ()):
            raise AttributeError(name)
        value = _stub(f"{self.__name__}.{name}")
        setattr(self, name, value)
        return value


class StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Last on sys.meta_path: whatever no real finder has (outside sglang) becomes a stub module."""

    def __init__(self, versions):
        self.stubbed = set()
        self.versions = versions  # module -> the version the profile pins (torch 2.11.0)

    def find_spec(self, fullname, path, target=None):
        top = fullname.split(".")[0]
        if top == "sglang" or top in sys.stdlib_module_names or top == "org":  # org: platform's Jython probe
            return None
        self.stubbed.add(top)
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec):
        module = _StubModule(spec.name)
        module.__path__ = []
        module.__version__ = self.versions.get(spec.name, "0.0.0")
        return module

    def exec_module(self, module):
        pass


def sha256_file(path):
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def real_parser(wheel, tmp, versions):
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(tmp)
    sys.path.insert(0, str(tmp))
    finder = StubFinder(versions)
    sys.meta_path.append(finder)
    server_args = importlib.import_module("sglang.srt.server_args")  # the wheel's, after the finder
    parser = argparse.ArgumentParser()
    server_args.ServerArgs.add_cli_args(parser)
    return parser, finder.stubbed


def entries(parser):
    """{first option string: entry} for every action but --help, in the parser's order."""
    table, stubbed = {}, []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        name = BUILTIN.get(type(action), type(action).__name__)
        entry = {"names": list(action.option_strings), "action": name}
        if action.type is not None:
            entry["type"] = "<stub>" if is_stub(action.type) else getattr(action.type, "__name__", repr(action.type))
        if action.nargs is not None and name not in IMPLIED_NARGS:
            entry["nargs"] = action.nargs
        if action.const is not None and name in ("store", "append"):  # nargs "?": the value of a bare flag
            entry["const"] = action.const
        if action.choices is not None:
            choices = None if is_stub(action.choices) else list(action.choices)
            if choices is None or any(is_stub(choice) for choice in choices):
                entry["choices"] = "<computed>"
                stubbed.append(action.option_strings[0])
            else:
                entry["choices"] = sorted(choices) if isinstance(action.choices, (set, frozenset)) else choices
        table[action.option_strings[0]] = entry
    return table, stubbed


def scalar(value):
    return yaml.safe_dump(value, default_flow_style=True, width=1 << 20).removesuffix("\n...\n").strip()


def wrap(lines, indent, tokens, last):
    """Append tokens to lines, joined by ", " and wrapped at WIDTH onto lines of the given indent;
    `last` closes the final one."""
    line = indent
    for i, token in enumerate(tokens):
        text = token + (last if i == len(tokens) - 1 else ",")
        if len(line) + 1 + len(text) > WIDTH and line.strip():
            lines.append(line)
            line = indent
        line += (" " if line.strip() else "") + text
    lines.append(line)
    return lines


def render_entry(key, entry):
    """`  key: {names: [...], ..., choices: [...]}`, flow style on one line where it fits; else the
    choices list broken after its `[`, and the mapping after its `{` where even its head is too long
    (the two forms yamllint's indentation rule accepts)."""
    fields = [
        f"{field}: [{', '.join(map(scalar, value))}]" if isinstance(value, list) else f"{field}: {scalar(value)}"
        for field, value in entry.items()
        if field != "choices" or not isinstance(value, list)
    ]
    choices = entry.get("choices") if isinstance(entry.get("choices"), list) else None
    one = f"  {key}: {{" + ", ".join(fields + ([f"choices: [{', '.join(map(scalar, choices))}]"] if choices else []))
    if len(one) + 1 <= WIDTH:
        return [one + "}"]
    head = f"  {key}: {{" + ", ".join(fields) + (", choices: [" if choices is not None else "")
    if len(head) <= WIDTH and choices is not None:
        return wrap([head], "    ", [scalar(choice) for choice in choices], "]}")
    if choices is None:
        return wrap([f"  {key}: {{"], "    ", fields, "}")
    lines = wrap([f"  {key}: {{"], "    ", fields, ", choices: [")
    return wrap(lines, "      ", [scalar(choice) for choice in choices], "]}")


def render(table, header):
    lines = [MARKER + header[0]] + [f"# {line}".rstrip() for line in header[1:]] + ["flags:"]
    for key, entry in table.items():
        lines += render_entry(scalar(key), entry)
    return "\n".join(lines) + "\n"


MARKER = "# The launch-flag table of this release"  # where the generated section starts


def main(argv=None):
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("wheel", type=Path)
    args.add_argument("profile", type=Path)
    options = args.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        pins = yaml.safe_load(options.profile.read_text()).get("packages", {})
        versions = {name.replace("-", "_"): str(version) for name, version in pins.items()}
        parser, stubbed_modules = real_parser(options.wheel, Path(tmp), versions)
        table, stubbed = entries(parser)
    print(f"profile_flags: stubbed modules: {' '.join(sorted(stubbed_modules))}", file=sys.stderr)
    for flag in stubbed:
        print(f"profile_flags: the choices of {flag} came from a stub: written as <computed>", file=sys.stderr)
    header = [
        ", generated from the release's own argparse parser (ServerArgs.add_cli_args) by",
        f"`python tools/profile_flags.py {shlex.quote(options.wheel.name)} {shlex.quote(str(options.profile))}`",
        "(a venv with PyYAML, packaging, dill and msgspec only; every other import stubbed) from the PyPI wheel",
        f"{options.wheel.name},",
        f"sha256 {sha256_file(options.wheel)}.",
        "Do not edit by hand: regenerate. Per flag: its option strings, action (argparse's name for its",
        "own actions, else SGLang's class), type, nargs, const and choices; <computed>: came from a stub.",
    ]
    text = options.profile.read_text()
    if MARKER in text:
        text = text[: text.index(MARKER)]
    text = text.rstrip("\n") + "\n\n" + render(table, header)
    options.profile.write_text(text)
    print(f"profile_flags: {len(table)} flags written to {options.profile}", file=sys.stderr)


if __name__ == "__main__":
    main()
