"""The op class table used by `coverage`: ordered rules, first match wins.

Each rule matches on the entry's base name (prefixes, or `_`-separated words)
and on torchgen tags. "stub-ready" is special: a pointwise op whose DispatchStub
already exists, so an MPS kernel needs only a functor and one REGISTER_DISPATCH.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    name: str
    prefixes: tuple[str, ...] = ()
    words: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    needs_stub: bool = False


RULES: tuple[Rule, ...] = (
    Rule("foreach", prefixes=("_foreach_", "_fused_")),
    Rule("random", tags=("nondeterministic_seeded",),
         words=("rand", "randn", "randint", "random", "bernoulli", "poisson", "binomial",
                "multinomial", "normal", "rrelu", "dropout", "exponential", "geometric",
                "cauchy", "uniform")),
    Rule("stub-ready", tags=("pointwise",), needs_stub=True),
    Rule("pooling", words=("pool1d", "pool2d", "pool3d", "pool", "unpool2d", "unpool3d")),
    Rule("loss", words=("loss",)),
    Rule("linear algebra", prefixes=("linalg_", "_linalg_"),
         words=("cholesky", "lu", "svd", "eig", "eigh", "qr", "geqrf", "ormqr", "orgqr",
                "triangular", "lstsq", "matrix", "householder", "det", "slogdet", "inverse",
                "solve", "ldl", "mm", "bmm", "matmul", "addmm", "baddbmm", "pinverse")),
    Rule("reduction", tags=("reduction",),
         words=("sum", "mean", "prod", "norm", "std", "var", "mode", "median", "nanmedian",
                "kthvalue", "cumsum", "cumprod", "logcumsumexp", "cummax", "cummin", "histc",
                "histogram", "bincount", "unique", "topk", "sort", "argsort", "aminmax",
                "amax", "amin", "all", "any", "count")),
    Rule("indexing", words=("index", "take", "put", "gather", "scatter", "masked", "nonzero",
                            "embedding", "select", "slice", "where", "diagonal", "segment")),
)

OTHER = "other"
CLASS_NAMES = tuple(r.name for r in RULES) + (OTHER,)


def classify(base: str, tags: set[str], has_stub: bool) -> str:
    words = set(base.strip("_").split("_"))
    for rule in RULES:
        if rule.needs_stub:
            if has_stub and set(rule.tags) & tags:
                return rule.name
            continue
        if (base.startswith(rule.prefixes) if rule.prefixes else False) \
                or words & set(rule.words) or set(rule.tags) & tags:
            return rule.name
    return OTHER
