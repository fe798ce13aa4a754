"""The host side: CUDA driver access through cuda-python only (device, memory, tensor maps, modules, launch)."""
from .device import Device, current_device
from .driver import call, check, driver_available, unavailable_reason
from .launch import launch, max_active_clusters, max_active_ctas
from .memory import DeviceArray, empty, to_device, zeros
from .module import Function, Module, load_ptx
from .tensormap import encode, encode_raw, tensormap_bytes

__all__ = [
    "Device", "DeviceArray", "Function", "Module",
    "call", "check", "current_device", "driver_available", "empty", "encode", "encode_raw", "launch",
    "load_ptx", "max_active_clusters", "max_active_ctas", "tensormap_bytes", "to_device", "unavailable_reason", "zeros",
]
