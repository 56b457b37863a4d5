"""Scenario evaluation, judged on the final database state (the method of tau-bench).

A scenario (a TOML file in ``data/scenarios/``) names a passenger, the customer's turns,
the customer's answer to each approval prompt, and the *gold actions*: the writes a
perfect assistant would make. The judge applies the gold actions to a fresh copy of the
database and compares every business table with the database the assistant left
behind: the rows that had to change changed, and nothing else did. Procedural checks
come on top: every write was approved first, a denied action did not run, every tool
call was answered once, the facts the customer needed were said, and the conversation
was handed to a person (left waiting in the desk's queue, with a reason) exactly when
the scenario expects it (``[handoff]``), and, with a second approval above an amount
(``second_approval_above``), every check a member of staff was asked for was expected
(``staff_checks``), decided and applied: a refused action did not run and the assistant
was told why. What people do between the customer's turns is scripted too (``desk``
steps: ask for a person, withdraw the request, take, write, propose, decide a check,
hand back), run through the conversation protocol and judged: each step done or refused
as expected, four eyes on every check (and the records naming both people), the
assistant that answered each message (``answered_by``), and how every action put to the
customer ended (``action_ends``).

Two ways to run a scenario:

- offline, with the model's replies scripted in the scenario (``replies`` in each turn):
  this proves the conversation protocol, the graph, the tools, the approvals and the
  database together, and is part of the default test run;
- live (``travel-assistant eval``), with a real model as the assistant and another model
  playing the customer from the scenario's ``instructions``.
"""

from evaluation.gold_database import (
    apply_gold_actions,
    database_problems,
    dump_state,
    state_diff,
)
from evaluation.judge import (
    DeskStepResult,
    ScenarioResult,
    Transcript,
    action_end_problems,
    action_ends,
    answer_problems,
    answered_by,
    check_problems,
    desk_problems,
    four_eyes_problems,
    handoff_end,
    handoff_problems,
    judge,
)
from evaluation.reports import Usage, pass_hat_k, percentile, summarise, to_json, trial_record
from evaluation.runs import (
    CUSTOMER_OPENING,
    MAX_CUSTOMER_TURNS,
    PRICES_PER_MILLION,
    STAFF,
    STOP,
    converse,
    parse_decision,
    run_offline,
    run_scenario,
    simulated_customer,
)
from evaluation.scenarios import (
    ACTION_ENDS,
    DESK_ACTIONS,
    HANDOFF_ENDS,
    NOBODY,
    SCENARIO_DIR,
    SCENARIO_SEED,
    DeskStep,
    ExpectedHandoff,
    Resolver,
    Scenario,
    ScenarioError,
    StaffCheck,
    Turn,
    load_scenario,
    load_scenarios,
    parse_staff_check,
    select_scenarios,
)

__all__ = [
    "ACTION_ENDS",
    "CUSTOMER_OPENING",
    "DESK_ACTIONS",
    "HANDOFF_ENDS",
    "MAX_CUSTOMER_TURNS",
    "NOBODY",
    "PRICES_PER_MILLION",
    "SCENARIO_DIR",
    "SCENARIO_SEED",
    "STAFF",
    "STOP",
    "DeskStep",
    "DeskStepResult",
    "ExpectedHandoff",
    "Resolver",
    "Scenario",
    "ScenarioError",
    "ScenarioResult",
    "StaffCheck",
    "Transcript",
    "Turn",
    "Usage",
    "action_end_problems",
    "action_ends",
    "answer_problems",
    "answered_by",
    "apply_gold_actions",
    "check_problems",
    "converse",
    "database_problems",
    "desk_problems",
    "dump_state",
    "four_eyes_problems",
    "handoff_end",
    "handoff_problems",
    "judge",
    "load_scenario",
    "load_scenarios",
    "parse_decision",
    "parse_staff_check",
    "pass_hat_k",
    "percentile",
    "run_offline",
    "run_scenario",
    "select_scenarios",
    "simulated_customer",
    "state_diff",
    "summarise",
    "to_json",
    "trial_record",
]
