"""Pricing: pure, time-aware functions over price data (genai-prices), the user's price book and the
self-hosted clusters file. No storage here: the store calls these at ingest and in ``taskcost reprice``."""

from taskcost.pricing._api import (
    PRICE_SOURCE,
    PROVIDER_IDS,
    CallPrice,
    TokenUsage,
    money,
    price_library_provider,
)
from taskcost.pricing._book import (
    CustomModel,
    Discount,
    Fee,
    Override,
    PriceBook,
    ToolPrice,
    load_price_book,
    price_book_from_table,
)
from taskcost.pricing._clusters import (
    Cluster,
    ClustersFile,
    GpuRate,
    ServedCall,
    WindowAllocation,
    allocate_window,
    epoch_ns,
    gpu_catalogue,
    largest_remainder,
    load_clusters,
)
from taskcost.pricing._data import DataFileError, PriceData, bundled_data, current_data, install_data, reset_data
from taskcost.pricing._explain import explain
from taskcost.pricing._format import format_usd
from taskcost.pricing._pricer import (
    DEFAULT_PRICING_ATTRIBUTES,
    PRICING_TARGETS,
    Pricer,
    PricingConfig,
    PricingSource,
    active_pricer,
    install_pricing,
    price_call,
    pricing_inputs,
)
from taskcost.pricing._report import ClusterWindowCost, ModelChange, RepriceReport
from taskcost.pricing._toml import ConfigFileError

__all__ = [
    "DEFAULT_PRICING_ATTRIBUTES",
    "PRICE_SOURCE",
    "PRICING_TARGETS",
    "PROVIDER_IDS",
    "CallPrice",
    "Cluster",
    "ClusterWindowCost",
    "ClustersFile",
    "ConfigFileError",
    "CustomModel",
    "DataFileError",
    "Discount",
    "Fee",
    "GpuRate",
    "ModelChange",
    "Override",
    "PriceBook",
    "PriceData",
    "Pricer",
    "PricingConfig",
    "PricingSource",
    "RepriceReport",
    "ServedCall",
    "TokenUsage",
    "ToolPrice",
    "WindowAllocation",
    "active_pricer",
    "allocate_window",
    "bundled_data",
    "current_data",
    "epoch_ns",
    "explain",
    "format_usd",
    "gpu_catalogue",
    "install_data",
    "install_pricing",
    "largest_remainder",
    "load_clusters",
    "load_price_book",
    "money",
    "price_book_from_table",
    "price_call",
    "price_library_provider",
    "pricing_inputs",
    "reset_data",
]
