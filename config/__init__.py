"""Typed options for lakeline: table properties and their documented defaults."""

from .properties import PropertyProblem, PropertySpec, explicit, resolve, specs

__all__ = ["PropertyProblem", "PropertySpec", "explicit", "resolve", "specs"]
