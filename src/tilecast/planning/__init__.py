"""The deployment planner: the cheapest fleet that meets a service level (serving) or a deadline / budget
(training), searched over GPU type x count x layout x concurrency on the forecasters' own vectorised paths."""

from tilecast.planning.questions import (
    DeadlineError,
    PlanError,
    RateError,
    ServeQuestion,
    ServiceLevelError,
    TrainQuestion,
    question_from,
)
from tilecast.planning.result import PLAN_COLUMNS, TRAIN_PLAN_COLUMNS, Plan

__all__ = ["DeadlineError", "PLAN_COLUMNS", "Plan", "PlanError", "RateError", "ServeQuestion", "ServiceLevelError",
           "TRAIN_PLAN_COLUMNS", "TrainQuestion", "question_from"]
