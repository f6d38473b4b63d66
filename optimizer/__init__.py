"""Tandem's optimiser: SQL front-end, statistics, Ji's cost model and the two-phase search.

It imports neither Spark nor DuckDB: it reasons about plans, the engines run them."""

from optimizer.catalog import Catalog, load_catalog
from optimizer.errors import CatalogError, QueryError, TandemError
from optimizer.optimizer import Optimization, optimize, parse_placement
from optimizer.profile import Profile, load_profile

__all__ = ["Catalog", "CatalogError", "Optimization", "Profile", "QueryError", "TandemError",
           "load_catalog", "load_profile", "optimize", "parse_placement"]
