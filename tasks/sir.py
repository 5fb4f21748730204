"""SIR epidemics task of BSA-TNP (plugin ``builtin-sir``, kind ``task``).

The simulator is vectorised NumPy. Batches are padded to the largest Nc/Nt the config
allows, with ``mask_c``/``mask_t``; padded entries are 0.

``sir`` (:class:`SIRTask`; paper Sec. 5.2)
    x = cell centre in R^2 (``dim_x = 2``), y = the cell's state at a random step:
    ``encoding="state"`` (default) the class label 0/1/2 = S/I/R (``dim_y = 1``), for the
    ``categorical`` likelihood with ``classes=3``, as the paper (its code's
    ``MultinomialOutput``: softmax cross-entropy over the three states; Table 3's NLL is
    that categorical NLL per point); ``"onehot"``: indicators [S, I, R] (``dim_y = 3``),
    the encoding the paper's code feeds to its network, for real-valued heads such as
    ``normal`` (not comparable with the paper's NLL). A 64 x 64 grid on [-2, 2]^2, 25 steps, beta ~ Beta(2, 8),
    gamma ~ InvGamma(5, 0.4), omega ~ randint(1, 5) (1..4) initial infections;
    ``domain`` ``"shifted"`` = [8, 12]^2, ``"scaled"`` = [-4, 4]^2 on 128 x 128 (same
    cell size, 4x the points). Context: Nc ~ U{128..512} distinct cells; targets: the
    context cells plus ``num_target`` (1024) other distinct cells (the paper includes the
    context among the test points), so Nt = Nc + 1024.
"""
import numpy as np

from taylorformer.batch import empty_batch
from taylorformer.errors import TaskError
from taylorformer.hookspecs import hookimpl
from taylorformer.task import Task, check_choice, check_int, check_number, count_range, real_pair
from taylorformer.tasks.gp import BETA_RANGE, HYPERPARAMETER_RANGE
from taylorformer.tasks.spatial_gp import DOMAIN_BOXES

SIR_DOMAINS = ("train", "shifted", "scaled")
#: largest grid side and number of steps
MAX_GRID, MAX_STEPS = 4096, 10_000
S, I, R = 0, 1, 2


def sir_offsets(radius):
    """Neighbour offsets ``[(dy, dx)]`` with 0 < distance <= radius and their distances."""
    r = int(radius)
    offs = [(dy, dx) for dy in range(-r, r + 1) for dx in range(-r, r + 1)
            if 0 < dy * dy + dx * dx <= radius * radius]
    return offs, np.sqrt(np.array([dy * dy + dx * dx for dy, dx in offs], np.float64))


def simulate_sir(rng, beta, gamma, initial, grid=64, steps=25, radius=3.0):
    """Stochastic SIR epidemics on ``grid x grid`` cells, vectorised over tasks.

    ``beta``, ``gamma`` ``[B]`` floats and ``initial`` ``[B]`` ints. At step 0 ``initial``
    random cells are infected. Each step, a susceptible cell escapes infection from each
    infected cell at grid distance ``d`` (in cells, ``0 < d <= radius``) independently
    with probability ``1 - beta / d`` (the infection rate decays as the inverse of the
    distance; beyond ``radius`` there is no contact), and an infected cell recovers with
    probability ``gamma``; both use the state at the start of the step.
    Returns int8 states ``[steps + 1, B, grid, grid]`` (0 = S, 1 = I, 2 = R).
    """
    beta = np.asarray(beta, np.float64)
    gamma = np.minimum(np.asarray(gamma, np.float64), 1.0)
    b, g, r = len(beta), int(grid), int(radius)
    state = np.zeros((b, g * g), np.int8)
    for i, n in enumerate(np.asarray(initial, int)):
        state[i, rng.choice(g * g, size=int(n), replace=False)] = I
    state = state.reshape(b, g, g)
    offs, dist = sir_offsets(radius)
    log_escape = np.log1p(-np.minimum(beta[:, None] / dist[None], 1.0 - 1e-7))  # [B, n_off]
    out = np.empty((steps + 1, b, g, g), np.int8)
    out[0] = state
    for t in range(steps):
        infected = np.pad((state == I).astype(np.float64), ((0, 0), (r, r), (r, r)))
        log_p = np.zeros((b, g, g))
        for k, (dy, dx) in enumerate(offs):
            log_p += log_escape[:, k, None, None] * infected[:, r + dy:r + dy + g, r + dx:r + dx + g]
        u = rng.random((2, b, g, g))
        new_inf = (state == S) & (u[0] < -np.expm1(log_p))
        new_rec = (state == I) & (u[1] < gamma[:, None, None])
        state = state.copy()
        state[new_inf] = I
        state[new_rec] = R
        out[t + 1] = state
    return out


class SIRTask(Task):
    """SIR epidemics on a grid; see the module docstring."""

    name = "sir"
    dim_x = 2

    def __init__(self, *, domain="train", grid=64, steps=25, num_context=(128, 512),
                 num_target=1024, radius=3.0, encoding="state", beta=(2.0, 8.0),
                 gamma=(5.0, 0.4), initial=(1, 5)):
        self.domain = check_choice("sir", "domain", domain, SIR_DOMAINS)
        self.encoding = check_choice("sir", "encoding", encoding, ("state", "onehot"))
        self.dim_y = 3 if encoding == "onehot" else 1
        owner = "sir task"
        self.grid = check_int(owner, "grid", grid, 4, MAX_GRID)
        self.steps = check_int(owner, "steps", steps, 1, MAX_STEPS)
        self.radius = check_number(owner, "radius", radius, 1.0, float(self.grid))  # cells
        self.num_context = count_range("num_context", num_context, 0, owner=owner)
        self.num_target = count_range("num_target", num_target, 0, owner=owner)
        self.beta = real_pair("beta", beta, *BETA_RANGE, owner, ordered=False)  # Beta(a, b)
        self.gamma = real_pair("gamma", gamma, *HYPERPARAMETER_RANGE, owner, ordered=False)  # InvGamma
        self.initial = count_range("initial", initial, 1, owner=owner)
        if self.initial[0] >= self.initial[1] or self.initial[1] - 1 > self.grid ** 2:
            raise TaskError(f"{owner} 'initial' is [lo, hi) of a randint (hi exclusive) and must have "
                            f"1 <= lo < hi <= grid^2 + 1 = {self.grid ** 2 + 1}, got {initial!r}")
        factor = 4 if domain == "scaled" else 1
        self.cells = grid * (2 if domain == "scaled" else 1)
        self.lo, self.hi = DOMAIN_BOXES[domain]
        self.nc_range = (factor * self.num_context[0], factor * self.num_context[1])
        self.extra_range = (factor * self.num_target[0], factor * self.num_target[1])
        self.max_context = self.nc_range[1]
        self.max_target = self.nc_range[1] + self.extra_range[1]
        if self.max_target > self.cells ** 2:
            raise TaskError(f"{owner}: num_context + num_target = {self.max_target} target cells "
                            f"(domain {domain!r}) do not fit a {self.cells} x {self.cells} grid")
        self.check_memory()

    def cell_centres(self):
        """float32 ``[cells^2, 2]`` cell centres, row-major (axis 0 = first coordinate)."""
        c = self.lo + (np.arange(self.cells) + 0.5) * (self.hi - self.lo) / self.cells
        a, b = np.meshgrid(c, c, indexing="ij")
        return np.stack([a.ravel(), b.ravel()], -1).astype(np.float32)

    def encode(self, states):
        """float32 outputs ``[..., dim_y]`` of int ``states [...]`` (0 = S, 1 = I, 2 = R)."""
        if self.encoding == "state":
            return states[..., None].astype(np.float32)
        return np.eye(3, dtype=np.float32)[states]

    def sample(self, rng, batch_size, split):
        b = batch_size
        beta = rng.beta(*self.beta, size=b)
        gamma = self.gamma[1] / rng.gamma(self.gamma[0], 1.0, size=b)  # InvGamma(shape, scale)
        initial = rng.integers(self.initial[0], self.initial[1], size=b)  # randint: hi exclusive
        states = simulate_sir(rng, beta, gamma, initial, self.cells, self.steps, self.radius)
        t = rng.integers(1, self.steps + 1, size=b)
        centres = self.cell_centres()
        out = empty_batch(b, self.max_context, self.max_target, 2, self.dim_y)
        for i in range(b):
            nc = int(rng.integers(self.nc_range[0], self.nc_range[1] + 1))
            extra = int(rng.integers(self.extra_range[0], self.extra_range[1] + 1))
            cells = rng.permutation(self.cells ** 2)[:nc + extra]
            y = self.encode(states[t[i], i].reshape(-1)[cells])
            x = centres[cells]
            nt = nc + extra  # targets = the context cells + `extra` other cells
            out["xc"][i, :nc], out["yc"][i, :nc], out["mask_c"][i, :nc] = x[:nc], y[:nc], 1.0
            out["xt"][i, :nt], out["yt"][i, :nt], out["mask_t"][i, :nt] = x, y, 1.0
        return out

    def memory_estimate(self, batch_size):
        """The padded batch plus the simulation: int8 states ``(steps + 1) B cells^2`` and
        about 40 bytes per cell and task of float64 temporaries per step."""
        batch, formula = super().memory_estimate(batch_size)
        sim = batch_size * self.cells ** 2 * (self.steps + 1 + 40)
        return batch + sim, f"{formula}, plus the simulation B cells^2 (steps + 41) bytes with cells = {self.cells}"

    def get_config(self):
        return {"domain": self.domain, "grid": self.grid, "steps": self.steps,
                "num_context": list(self.num_context), "num_target": list(self.num_target),
                "radius": self.radius, "encoding": self.encoding, "beta": list(self.beta),
                "gamma": list(self.gamma), "initial": list(self.initial)}


@hookimpl
def register_tasks(register):
    register("sir", SIRTask, description="SIR epidemics on a 64x64 grid (BSA-TNP); context among targets; "
                                         "states 0/1/2 for the categorical likelihood (classes=3).")
