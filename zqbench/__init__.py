"""zqbench: prove how an LLM inference endpoint behaves under load.

Data flows one way:

    scenario -> schedule -> engine (transport + dialect) -> samples -> metrics -> SLO -> outputs
"""

__version__ = "0.1.0"
