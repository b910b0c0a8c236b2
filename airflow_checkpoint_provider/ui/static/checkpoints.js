// The React app plugin Airflow's UI loads for the "Checkpoints" navigation entry and tabs (plugins.py): on a
// DAG's or task instance's page (the UI gives it the DAG) the tab, else the job list and job pages.
import { h } from "./checkpoints-common.js";
import { JobPages } from "./checkpoints-pages.js";
import { CheckpointsTab } from "./checkpoints-tab.js";

function Checkpoints(props) {
  return props.dagId ? h(CheckpointsTab, props) : h(JobPages, props);
}

// Airflow's UI finds a plugin's component under the app's name ("Checkpoints", in plugins.py), else under
// AirflowPlugin: both, so another plugin's bundle loading at the same time cannot take this one's place.
globalThis.Checkpoints = Checkpoints;
globalThis.AirflowPlugin = Checkpoints;
