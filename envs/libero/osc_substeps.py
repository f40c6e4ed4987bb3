"""robosuite's operational-space control substeps, the same numbers with less Python.

robosuite runs its controllers at every physics substep (25 per LIBERO control step): the robot's
``control`` rebuilds the action limits three times, looks sites up by name, allocates Jacobians,
copies the mass matrix and steps the gripper's controller, whose output does not change between
policy steps. :class:`FastOscSubsteps` replaces the env's ``_pre_action`` on the instance:

- the policy step (the first substep) sets the goals with robosuite's own code
  (``CompositeController.set_goal``: the OSC's goal pose, the gripper's action);
- every substep computes the arm's torques with the same operations on the same inputs as
  ``OperationalSpaceController.run_controller`` (robosuite's numba functions ``opspace_matrices``,
  ``nullspace_torques``, ``orientation_error`` and numpy's products on arrays of the same shapes and
  layouts), so ``ctrl`` gets the same bits;
- the gripper's ``ctrl`` is written at the policy step by robosuite's gripper controller and left as
  it is at the other substeps (robosuite would write the same value again: its simple gripper
  controller has no interpolator).

The controller's state (``ref_pos``, ``J_full``, ``mass_matrix``, ``torques``, ...) is updated as
robosuite updates it. Left out: the robot's history buffers of the policy step (``recent_qpos``,
``recent_ee_acc``, ...), which only robosuite's ``js_energy`` and ``ee_ft_integral`` read (the wipe
task's reward), not LIBERO. Anything else (another controller type, interpolators, a mobile or
two-armed robot) keeps robosuite's path: :func:`install` returns None and changes nothing.
"""

from __future__ import annotations

from typing import Any

import mujoco
import numpy as np


def _contiguous(indexes: Any) -> slice | None:
    """``indexes`` as a slice where they are consecutive, else None."""
    indexes = [int(index) for index in indexes]
    if not indexes or indexes != list(range(indexes[0], indexes[0] + len(indexes))):
        return None
    return slice(indexes[0], indexes[-1] + 1)


def _supported(env: Any) -> str | None:
    """None where :class:`FastOscSubsteps` computes what robosuite would, else why not."""
    from robosuite.controllers.composite.composite_controller import CompositeController
    from robosuite.controllers.parts.arm.osc import OperationalSpaceController
    from robosuite.controllers.parts.gripper.simple_grip import SimpleGripController
    from robosuite.robots.fixed_base_robot import FixedBaseRobot

    if len(env.robots) != 1 or type(env.robots[0]) is not FixedBaseRobot:
        return "not one fixed-base robot"
    if not env.lite_physics:
        return "lite_physics is off (the controllers call forward themselves)"
    robot = env.robots[0]
    composite = robot.composite_controller
    if type(composite) is not CompositeController:
        return f"composite controller {type(composite).__name__}"
    if list(composite.part_controllers) != ["right", "right_gripper"]:
        return f"parts {list(composite.part_controllers)}"
    arm, gripper = composite.part_controllers["right"], composite.part_controllers["right_gripper"]
    if type(arm) is not OperationalSpaceController or type(gripper) is not SimpleGripController:
        return f"controllers {type(arm).__name__}, {type(gripper).__name__}"
    if arm.interpolator_pos or arm.interpolator_ori or gripper.interpolator:
        return "interpolators"
    if arm.input_ref_frame != "base" or not arm.uncoupling or arm.num_ref_sites != 1 or not arm.lite_physics:
        return "OSC options"
    if _contiguous(arm.qpos_index) is None or _contiguous(arm.qvel_index) is None:
        return "arm joints not consecutive"
    if not all(robot._enabled_parts.get(part, False) for part in composite.part_controllers):
        return "disabled parts"
    return None


class FastOscSubsteps:
    """The env's ``_pre_action`` with robosuite's OSC substeps computed directly (see the module)."""

    def __init__(self, env: Any) -> None:
        self.env = env
        self._robosuite_pre_action = type(env)._pre_action.__get__(env)
        # the controllers of the current episode (robosuite builds new ones at each reset, and a new
        # simulator at a hard reset): _bind reads them and the simulator at the first policy step of each
        self._composite: Any = None
        self.substeps = 0  # substeps computed here (for tests)

    def __call__(self, action: np.ndarray, policy_step: bool = False) -> None:
        if policy_step:
            self._policy_step(action)
        else:
            self._substep()

    def _bind(self, composite: Any) -> None:
        robot, sim = self.env.robots[0], self.env.sim
        self.model: mujoco.MjModel = sim.model._model
        self.data: mujoco.MjData = sim.data._data
        model, nv = self.model, self.model.nv
        # site Jacobians (position, rotation), each its own (3, nv) array as robosuite allocates them
        self._jac_ref = (np.zeros((3, nv)), np.zeros((3, nv)))
        self._jac_origin = (np.zeros((3, nv)), np.zeros((3, nv)))
        self._full_mass = np.ndarray(shape=(nv, nv), dtype=np.float64, order="C")
        arm, gripper = composite.part_controllers["right"], composite.part_controllers["right_gripper"]
        self._composite, self._arm, self._gripper = composite, arm, gripper
        self._action_dim = max(end for _, end in composite._action_split_indexes.values())
        self._ref_site = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, arm.ref_name)
        center = f"{arm.naming_prefix}{arm.part_name}_center"
        self._origin_site = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, center)
        self._qpos, self._qvel = _contiguous(arm.qpos_index), _contiguous(arm.qvel_index)
        self._arm_actuators = robot._ref_actuators_indexes_dict["right"]
        self._gripper_actuators = robot._ref_actuators_indexes_dict["right_gripper"]
        ranges = model.actuator_ctrlrange
        self._arm_range = (ranges[self._arm_actuators, 0], ranges[self._arm_actuators, 1])
        self._gripper_range = (ranges[self._gripper_actuators, 0], ranges[self._gripper_actuators, 1])

    def _policy_step(self, action: np.ndarray) -> None:
        """robosuite's ``FixedBaseRobot.control(action, policy_step=True)`` without the history buffers."""
        composite = self.env.robots[0].composite_controller
        if composite is not self._composite:
            self._bind(composite)
        if len(action) != self._action_dim:
            raise AssertionError(
                f"environment got invalid action dimension -- expected {self._action_dim}, got {len(action)}"
            )
        if not (self._arm.new_update and self._gripper.new_update):
            # Controllers fresh from a reset hold the state of their construction (before the init state
            # was set) and robosuite's first torques use it, not the simulator's: its own code computes them.
            self._robosuite_pre_action(action, True)
            return
        composite.update_state()
        composite.set_goal(action)  # the OSC's update() runs here; run_controller would not run it again
        self._substep()
        low, high = self._gripper_range
        self.data.ctrl[self._gripper_actuators] = np.clip(self._gripper.run_controller(), low, high)

    def _substep(self) -> None:
        """One substep of robosuite's ``FixedBaseRobot.control`` for the arm."""
        from robosuite.utils.control_utils import nullspace_torques, opspace_matrices, orientation_error

        arm, model, data, qvel_index = self._arm, self.model, self.data, self._qvel
        qvel = data.qvel
        # CompositeController.update_state -> update_origin
        origin_pos = np.array(data.site_xpos[self._origin_site])
        origin_ori = np.array(data.site_xmat[self._origin_site].reshape([3, 3]))
        arm.origin_pos, arm.origin_ori = origin_pos, origin_ori
        # Controller.update (lite physics: no forward)
        jacp, jacr = self._jac_ref
        mujoco.mj_jacSite(model, data, jacp, jacr, self._ref_site)
        arm.ref_pos[:] = data.site_xpos[self._ref_site]
        arm.ref_ori_mat[:, :] = data.site_xmat[self._ref_site].reshape([3, 3])
        arm.ref_pos_vel[:] = np.dot(jacp, qvel)
        arm.ref_ori_vel[:] = np.dot(jacr, qvel)
        arm.J_pos[:, :] = jacp[:, qvel_index]
        arm.J_ori[:, :] = jacr[:, qvel_index]
        arm.J_full[:3] = arm.J_pos
        arm.J_full[3:] = arm.J_ori
        arm.joint_pos = data.qpos[self._qpos].copy()
        arm.joint_vel = qvel[qvel_index].copy()
        mujoco.mj_fullM(model, self._full_mass, data.qM)
        # robosuite's M[idx, :][:, idx] is a Fortran-ordered copy; numba compiles for that layout
        arm.mass_matrix = np.array(self._full_mass[qvel_index, qvel_index], order="F")
        # OperationalSpaceController.run_controller (input_ref_frame "base", no interpolators, uncoupled)
        desired_world_pos = origin_pos + np.dot(origin_ori, arm.goal_pos)
        desired_world_ori = np.dot(origin_ori, arm.goal_ori)
        ori_error = orientation_error(desired_world_ori, arm.ref_ori_mat)
        position_error = desired_world_pos - arm.ref_pos
        origin_jacp, origin_jacr = self._jac_origin
        mujoco.mj_jacSite(model, data, origin_jacp, origin_jacr, self._origin_site)
        vel_pos_error = -(arm.ref_pos_vel - np.dot(origin_jacp, qvel))
        desired_force = np.multiply(position_error, arm.kp[0:3]) + np.multiply(vel_pos_error, arm.kd[0:3])
        vel_ori_error = -(arm.ref_ori_vel - np.dot(origin_jacr, qvel))
        desired_torque = np.multiply(ori_error, arm.kp[3:6]) + np.multiply(vel_ori_error, arm.kd[3:6])
        _, lambda_pos, lambda_ori, nullspace_matrix = opspace_matrices(
            arm.mass_matrix, arm.J_full, arm.J_pos, arm.J_ori
        )
        decoupled_wrench = np.concatenate(
            [np.dot(lambda_pos, desired_force), np.dot(lambda_ori, desired_torque)]
        )
        torques = np.dot(arm.J_full.T, decoupled_wrench) + data.qfrc_bias[qvel_index]
        torques += nullspace_torques(
            arm.mass_matrix, nullspace_matrix, arm.initial_joint, arm.joint_pos, arm.joint_vel
        )
        arm.torques = torques
        arm.new_update = True
        # FixedBaseRobot.control: clip to the actuators' range
        low, high = self._arm_range
        data.ctrl[self._arm_actuators] = np.clip(torques, low, high)
        self.substeps += 1


def install(env: Any) -> FastOscSubsteps | None:
    """Give robosuite ``env`` (LIBERO's task env) the fast substeps; None (and nothing changed) where its
    robot or controllers are not the ones they reproduce."""
    if _supported(env) is not None:
        return None
    fast = FastOscSubsteps(env)
    env._pre_action = fast
    return fast
