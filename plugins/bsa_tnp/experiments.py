"""Rows of the BSA-TNP paper (Jenson et al. 2025) to replicate (kind ``experiment``).

Table 1: 2-D GP regression, a model trained on [-2, 2]^2 and evaluated on the training
domain, the domain shifted to [8, 12]^2 and the domain scaled to [-4, 4]^2 (NLL per
target point, lower is better: -0.32 / -0.32 / -0.28). Table 3: SIR epidemics on a
64x64 grid, the same three domains (categorical NLL: 0.19 / 0.19 / 0.17). The paper
prints ``+-`` without saying over what ("All seeds exhibited the same pattern").
"""
from taylorformer.replication import Evaluation, Row, SmallBudget, Training

PAPER = "BSA-TNP (Jenson et al. 2025)"
NOTES = (
    "Validation: every 10K steps on 5K batches (App. B) in the paper budget; the evaluated model "
    "is the best validation checkpoint (our choice: the paper keeps it only for Beijing).",
    "Test size: 5K batches of 8 (App. B says so for SIR; the 2-D GP's is not stated, we use the same).",
    "No warm-up is stated: the cosine schedule starts at its peak.",
)
DOMAINS = {"train": "the training domain [-2, 2]^2", "shifted": "the shifted domain [8, 12]^2",
           "scaled": "the scaled domain [-4, 4]^2 (4x the points)"}
SMALL = SmallBudget(steps=1_000, eval_tasks=256,
                    why="1% of the paper's steps; measured on a 2-core CPU (shared): about 1.8 s a step at "
                        "batch 8, 30 min for training, validation and the test set")


#: protocol 2: the bsa-tnp preset's decoder head is 256-64, as the paper's App. A states
#: (docs/parity.md, BSA-TNP); the results recorded before ran the earlier 128-128 head
PROTOCOL_VERSION = 2
EARLIER_PROTOCOLS = {1: "the bsa-tnp preset's decoder head was 128-128 (464,946 parameters); the paper's "
                        "App. A states 256-64 (473,074)"}


def training(min_learning_rate):
    return Training(steps=100_000, batch_size=8, optimizer="adamw", learning_rate=1e-4, schedule="cosine",
                    min_learning_rate=min_learning_rate, weight_decay=1e-4, clip_norm=0.5,
                    val_every=10_000, val_batches=5_000)


GP_VALUES = {"train": (-0.32, 0.01), "shifted": (-0.32, 0.00), "scaled": (-0.28, 0.01)}
SIR_VALUES = {"train": (0.19, 0.00), "shifted": (0.19, 0.00), "scaled": (0.17, 0.00)}


def gp_row(domain):
    value, error = GP_VALUES[domain]
    return Row(
        id=f"bsa-tnp-gp2d-{domain}", paper=PAPER, table="Table 1", dataset=f"2-D GP, {domain} domain",
        protocol=("EQ kernel, l ~ Beta(3, 7), variance 1, noise 0.1 on the context only, Nc ~ U[128, 512], "
                  f"1,024 test points; trained on [-2, 2]^2, evaluated on {DOMAINS[domain]} (Sec. 5.1, App. B)"),
        model="bsa-tnp", task="gp-2d-bsa", task_config={"domain": "train"}, metric="nll",
        paper_value=value, paper_error=error, paper_error_kind="as printed", training=training(2e-5),
        evaluation=Evaluation(num_tasks=40_000, batch_size=8, task_config={"domain": domain}),
        small=SMALL, run="bsa-tnp-gp2d", baselines=("exact-gp",),
        protocol_version=PROTOCOL_VERSION, earlier_protocols=EARLIER_PROTOCOLS,
        notes=NOTES + ("Nc: 'uniformly from [128, 512]' with unstated endpoints; the task draws U{128..511}.",
                       "Scaled domain: 'doubled along each axis'; we keep the point density, so the "
                       "scaled tasks have 4x the context and target points (as the SIR's 128x128 grid)."))


#: why the scaled SIR row is not comparable (measured with taylorformer.workflow.baselines on the first
#: 256 test tasks of each domain; see docs/replication.md)
SIR_SCALED_NOT_COMPARABLE = (
    "the scaled tasks simulate the same epidemic (1-4 initial infections, 25 steps) on a 4x larger "
    "grid, so 83.5% of the test cells are susceptible against 60.4% in the training domain, and the "
    "context-frequency baseline improves from NLL 0.615 to 0.429 by construction; BSA-TNP's scaled "
    "domain has not been rebuilt to keep the epidemic's extent comparable")


def sir_row(domain):
    value, error = SIR_VALUES[domain]
    return Row(
        id=f"bsa-tnp-sir-{domain}", paper=PAPER, table="Table 3", dataset=f"SIR epidemics, {domain} domain",
        protocol=("64x64 grid on [-2, 2]^2, 25 steps, beta ~ Beta(2, 8), gamma ~ InvGamma(5, 0.4), "
                  "omega ~ randint(1, 5); Nc ~ U[128, 512] cells, the context among the 1,024 + Nc test "
                  f"cells; trained on [-2, 2]^2, evaluated on {DOMAINS[domain]} (Sec. 5.2, App. B)"),
        model="bsa-tnp", model_overrides={"likelihood": {"name": "categorical", "classes": 3}},
        task="sir", task_config={"domain": "train"}, metric="nll", paper_value=value, paper_error=error,
        paper_error_kind="as printed", training=training(1e-5),
        evaluation=Evaluation(num_tasks=40_000, batch_size=8, task_config={"domain": domain}),
        small=SMALL, run="bsa-tnp-sir", baselines=("context-frequency",),
        protocol_version=PROTOCOL_VERSION, earlier_protocols=EARLIER_PROTOCOLS,
        not_comparable=SIR_SCALED_NOT_COMPARABLE if domain == "scaled" else "",
        notes=NOTES + ("Likelihood: categorical over S/I/R (the paper's code's MultinomialOutput); the "
                       "NLL is the categorical NLL per test cell.",))


ROWS = [gp_row(d) for d in DOMAINS] + [sir_row(d) for d in DOMAINS]
