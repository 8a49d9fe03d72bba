# Copyright (c) 2026 gpulxc.sglang developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Values as the roles' Jinja read them, for the plan filters that took their checks over: Jinja's int and float."""

from __future__ import annotations


def jinja_int(value):
    """Jinja's int filter: the number (a float cut), 0 where it is none."""
    try:
        return int(value)
    except (TypeError, ValueError):
        try:
            return int(float(value))
        except (TypeError, ValueError, OverflowError):
            return 0


def jinja_float(value):
    """Jinja's float filter: the number, 0.0 where it is none."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0
