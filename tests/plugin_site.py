"""Mechanism plugins installed as pip leaves them: a module, and a dist-info naming the
distribution, its version and its entry points in the group ``pate_cli.mechanisms``, in a
folder put on ``PYTHONPATH``. For the tests, and for CI, which runs the whole suite with a
plugin installed so (:func:`install_suite_plugin`)::

    python -m tests.plugin_site DIR    # then PYTHONPATH=DIR python -m pytest
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def gumbel_source() -> str:
    """The whole Gumbel-max plugin, as docs/mechanisms.md shows it."""
    doc = (ROOT / "docs" / "mechanisms.md").read_text()
    section = doc.split("## Gumbel-max, the whole plugin", 1)[1]
    (code,) = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    return code


def distribution(site: Path, name: str, points: str, version: str = "1.0") -> Path:
    """A distribution's metadata on ``site``, its entry points ``points`` (lines of
    ``name = module:Class``) in the group ``pate_cli.mechanisms``."""
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(f"[pate_cli.mechanisms]\n{points}\n")
    return info


def install_gumbel(site: Path) -> Path:
    """docs/mechanisms.md's Gumbel-max, installed on ``site`` as the distribution gumbel-max
    1.0."""
    site.mkdir(parents=True, exist_ok=True)
    (site / "gumbel_max.py").write_text(gumbel_source())
    distribution(site, "gumbel-max", "gumbel-max = gumbel_max:GumbelMax")
    return site


def install_suite_plugin(site: Path) -> Path:
    """The plugin the whole suite runs beside (CI): docs/mechanisms.md's Gumbel-max under
    names no test gives a mechanism of its own (the tests register and install Gumbel-max
    itself, whose name and flag one installed copy would take): the mechanism 'suite-gumbel'
    of the parameter ``spread``, module ``suite_gumbel``, distribution suite-gumbel 1.0."""
    source = gumbel_source().replace('"gumbel-max"', '"suite-gumbel"')
    source = source.replace('short: ClassVar[str] = "gumbel"', 'short: ClassVar[str] = "suite"')
    source = source.replace("temperature", "spread").replace("TEMPERATURE", "SPREAD")
    site.mkdir(parents=True, exist_ok=True)
    (site / "suite_gumbel.py").write_text(source)
    distribution(site, "suite-gumbel", "suite-gumbel = suite_gumbel:GumbelMax")
    return site


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m tests.plugin_site DIR")
    print(install_suite_plugin(Path(sys.argv[1])))
