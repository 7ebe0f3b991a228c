"""Puts the root-level asset folders into the wheel as `app/templates`, `app/static`, `app/schemas`.

The repository keeps them at the top (the layout the project documents); an installed `app` finds
them beside its own modules (`app/paths.py`). Everything else is declared in pyproject.toml.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ASSET_DIRS = ("templates", "static", "schemas")


class build_py_with_assets(build_py):
    """The usual build, then the asset folders copied under `app/` in the build tree.

    An editable install skips the copy: there `app` is imported from the checkout and reads the
    folders where they are."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        root = Path(__file__).resolve().parent
        for name in ASSET_DIRS:
            shutil.copytree(root / name, Path(self.build_lib) / "app" / name, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


setup(cmdclass={"build_py": build_py_with_assets})
