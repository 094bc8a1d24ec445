"""Network impairment during a run: real kernel packet loss with nftables.

nft.py       build, apply, list and remove the drop rules (the only module running nft)
hook.py      PacketLossHook: a RunHook that follows the impaired stages
analysis.py  packet_loss_analysis: P99 under loss vs baseline, error share, recovery;
             packet_loss_record: the same, typed for summary.json
"""

from __future__ import annotations

from zqbench.impair.analysis import packet_loss_analysis, packet_loss_record
from zqbench.impair.hook import PacketLossHook
from zqbench.impair.nft import preflight

__all__ = ["PacketLossHook", "packet_loss_analysis", "packet_loss_record", "preflight"]
