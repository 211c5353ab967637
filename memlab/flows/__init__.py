"""The flows of a :class:`~memlab.MemoryStack`: what each public call does, step by step.

Each flow receives its collaborators explicitly (session manager, users, datasets,
relational store, an accessor for the permanent memory, the LLM client, the
retriever registry, merge policy, analysis mode, clock) and never the stack, so a
flow can be built and tested on its own and the stack stays the only place that
wires them together.

* :mod:`memlab.flows.remember` - ``remember()``, ``improve()``, background self-improvement;
* :mod:`memlab.flows.forget` - ``forget()``;
* :mod:`memlab.flows.distill` - ``session.distill_session()`` (and the distillation in ``improve()``);
* :mod:`memlab.flows.recall` - ``recall()`` and ``search()``;
* :mod:`memlab.flows.turn` - one session turn under an analysis mode;
* :mod:`memlab.flows.warmup` - recall's warm-up marker.
"""
