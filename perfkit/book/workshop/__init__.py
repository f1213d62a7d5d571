"""The workshop kit: the plans the teaching page renders, the labs' shared machinery, and the time
each live run takes, predicted before it runs.

- :mod:`.plan`: the 3-hour workshop and the one-day variant (:func:`timetable`), the labs and what
  each runs live;
- :mod:`.labs`: a lab's first cell (:func:`start`) and its live runs (:func:`live`);
- :mod:`.estimate`: a live run's predicted time on this machine or a T4 (:func:`estimate_run`), and
  what an experiment's own models predict on another GPU (:func:`predict_frame`);
- :mod:`.expect`: what the room should see: a T4's numbers by perfkit's models beside our H200
  recording (:func:`expectations`);
- :mod:`.problems`: one problem per lab, answered by perfkit.
"""

from __future__ import annotations

from .estimate import RunEstimate, estimate_run, predict_frame
from .expect import RECORDED, expectations
from .labs import LIVE_EXPERIMENTS, ROOM_GPU, estimates, lab_dtype, live, machine_note, quick_settings, run_times, start
from .plan import LABS, LIVE, ONE_DAY, PLANS, THREE_HOUR, Block, assigned_problems, timetable

__all__ = ["Block", "LABS", "LIVE", "LIVE_EXPERIMENTS", "ONE_DAY", "PLANS", "RECORDED", "ROOM_GPU", "RunEstimate",
           "THREE_HOUR", "assigned_problems", "estimate_run", "estimates", "expectations", "lab_dtype", "live", "machine_note",
           "predict_frame", "quick_settings", "run_times", "start", "timetable"]
