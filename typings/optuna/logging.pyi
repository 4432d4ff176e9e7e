CRITICAL: int
ERROR: int
WARNING: int
INFO: int
DEBUG: int

def get_verbosity() -> int: ...
def set_verbosity(verbosity: int) -> None: ...
