"""Short GPU type names from the marketing names NVML and nvidia-smi report.

Profiles, plans and hosts files speak of ``T4``, ``A100``, ``RTX2080Ti``; drivers say
``Tesla T4`` or ``NVIDIA A100-SXM4-40GB``. A hosts-file ``gpu_type`` names the GPUs the driver
names as that type (in any size or form factor), or names not at all; a GPU of another type in
the same box (a Ti beside its plain card, a V100S beside V100s) is left out, said (gpu_inventory.py).
"""

from __future__ import annotations

import re

_PREFIXES = ("nvidia ", "tesla ", "geforce ", "quadro ")


def short_gpu_type(name: str) -> str:
    text = name.strip()
    lowered = text.lower()
    changed = True
    while changed:
        changed = False
        for prefix in _PREFIXES:
            if lowered.startswith(prefix):
                text, lowered = text[len(prefix):], lowered[len(prefix):]
                changed = True
    text = re.split(r"[-_ ](?:sxm|pcie|\d+gb)", text, maxsplit=1, flags=re.IGNORECASE)[0]
    return re.sub(r"\s+", "", text) or name
