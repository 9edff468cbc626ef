"""Pricing: pure, time-aware functions over price data (genai-prices), the user's price book and the
self-hosted clusters file. No storage here: the store calls these at ingest and in ``taskcost reprice``."""

from typing import TYPE_CHECKING

from taskcost._internal.lazy import lazy_exports
from taskcost.pricing._format import format_usd

if TYPE_CHECKING:
    from taskcost.pricing._allocate import SelfHostedAllocation, SelfHostedCall, allocate_self_hosted, allocation_range
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
        cluster_windows,
        describe_cluster,
        epoch_ns,
        gpu_catalogue,
        largest_remainder,
        load_clusters,
    )
    from taskcost.pricing._data import DataFileError, PriceData, bundled_data, current_data, install_data, reset_data
    from taskcost.pricing._explain import explain
    from taskcost.pricing._pricer import (
        Pricer,
        PricingConfig,
        PricingSource,
        default_pricer,
        file_book_table,
        price_call,
        pricing_inputs,
    )
    from taskcost.pricing._report import ClusterWindowCost, ModelChange, RepriceReport
    from taskcost.pricing._targets import DEFAULT_PRICING_ATTRIBUTES, PRICING_TARGETS
    from taskcost.pricing._toml import ConfigFileError

__getattr__, __dir__ = lazy_exports(__name__)

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
    "SelfHostedAllocation",
    "SelfHostedCall",
    "ServedCall",
    "TokenUsage",
    "ToolPrice",
    "WindowAllocation",
    "default_pricer",
    "allocate_self_hosted",
    "allocate_window",
    "allocation_range",
    "bundled_data",
    "cluster_windows",
    "current_data",
    "describe_cluster",
    "epoch_ns",
    "explain",
    "format_usd",
    "gpu_catalogue",
    "install_data",
    "file_book_table",
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
