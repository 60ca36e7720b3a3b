"""Typed options for lakeline: table properties and their documented defaults."""

from .properties import PropertyProblem, PropertySpec, explicit, resolve, specs
from .table_properties import TableProperties

__all__ = ["PropertyProblem", "PropertySpec", "TableProperties", "explicit", "resolve", "specs"]
