__all__ = ["BaseSampler", "TPESampler"]

class BaseSampler: ...

class TPESampler(BaseSampler):
    def __init__(
        self,
        *,
        consider_prior: bool | None = None,
        prior_weight: float | None = None,
        consider_magic_clip: bool | None = None,
        consider_endpoints: bool | None = None,
        n_startup_trials: int = 10,
        n_ei_candidates: int = 24,
        seed: int | None = None,
        multivariate: bool | None = None,
        group: bool = False,
        constant_liar: bool = True,
    ) -> None: ...
