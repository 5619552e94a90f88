# test_stubs.py: sluice/_sluice.pyi (the types of the C extension, PEP 561 with py.typed) names what the built module
# exports: every module-level name and every method and attribute of its classes, no more and no fewer.
import ast
import os

import sluice
from sluice import _sluice

PKG = os.path.dirname(os.path.abspath(sluice.__file__))


def stub_names():
    """The stub's module-level classes and functions, and each class's methods, properties and attributes."""
    with open(os.path.join(PKG, "_sluice.pyi")) as f:
        tree = ast.parse(f.read())
    top, members = set(), {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            top.add(node.name)
        if isinstance(node, ast.ClassDef):
            members[node.name] = {n.name for n in node.body if isinstance(n, ast.FunctionDef)} | \
                                 {n.target.id for n in node.body if isinstance(n, ast.AnnAssign)}
    return top, members


def test_installed_with_py_typed():
    assert os.path.exists(os.path.join(PKG, "py.typed"))
    assert os.path.exists(os.path.join(PKG, "_sluice.pyi"))


def test_stub_names_match_the_module():
    top, members = stub_names()
    module = {n for n in dir(_sluice) if not n.startswith("__")}
    assert top == module, f"only in the stub: {sorted(top - module)}; only in the module: {sorted(module - top)}"
    for cls, names in members.items():
        rt = getattr(_sluice, cls)
        own = {n for n in vars(rt) if not n.startswith("__")}  # with what sluice/__init__.py sets on the classes
        dunders = {n for n in ("__init__", "__iter__", "__next__") if n in vars(rt)}
        if issubclass(rt, BaseException):
            dunders = {"code"} if cls == "Error" else set()  # .code: set on each one raised
        assert names == own | dunders, (f"{cls}: only in the stub: {sorted(names - own - dunders)}; only in the "
                                        f"module: {sorted((own | dunders) - names)}")
