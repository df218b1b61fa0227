# Injected into the vision_msgs build by vision_factory/tools/interfaces.py through CMAKE_PROJECT_INCLUDE,
# only when building against the PyPI ros-* wheels; a ROS distribution build never reads this file.
#
# Why: the wheels' exported targets <pkg>::<pkg>__rosidl_generator_py (share/<pkg>/cmake/*Export.cmake) carry
# INTERFACE_INCLUDE_DIRECTORIES of the machine that built them, e.g.
#   /opt/python/cp311-cp311/include/python3.11;/opt/python/cp311-cp311/lib/python3.11/site-packages/numpy/_core/include
# CMake refuses to generate when a linked imported target names an include folder that does not exist.
# Instead of editing the installed wheel files (pip owns them: reinstalling or upgrading a wheel would silently
# bring the stale folders back, and a patch would have to track every wheel's file layout), this overrides the
# property in this build only: at the end of the top-level CMakeLists.txt, after every find_package() ran and
# before the generate step that checks the folders, each missing folder is replaced by this machine's Python
# headers (VF_PYTHON_INCLUDE) or NumPy headers (VF_NUMPY_INCLUDE); any other missing folder is dropped with a
# warning.
#
# Needs CMake 3.21 (IMPORTED_TARGETS directory property; cmake_language(DEFER) is 3.19).

if(NOT VF_PYTHON_INCLUDE OR NOT VF_NUMPY_INCLUDE)
  message(FATAL_ERROR "pip_prefix.cmake needs -DVF_PYTHON_INCLUDE=... and -DVF_NUMPY_INCLUDE=...")
endif()

function(_vision_factory_fix_wheel_include_dirs)
  get_directory_property(_targets DIRECTORY "${CMAKE_SOURCE_DIR}" IMPORTED_TARGETS)
  foreach(_target IN LISTS _targets)
    get_target_property(_dirs ${_target} INTERFACE_INCLUDE_DIRECTORIES)
    if(NOT _dirs)
      continue()
    endif()
    set(_fixed "")
    set(_changed FALSE)
    foreach(_dir IN LISTS _dirs)
      if(_dir MATCHES "\\$<" OR EXISTS "${_dir}")
        list(APPEND _fixed "${_dir}")
      elseif(_dir MATCHES "numpy")
        list(APPEND _fixed "${VF_NUMPY_INCLUDE}")
        set(_changed TRUE)
      elseif(_dir MATCHES "/include/python[0-9]")
        list(APPEND _fixed "${VF_PYTHON_INCLUDE}")
        set(_changed TRUE)
      else()
        message(WARNING "${_target}: dropping missing include folder ${_dir}")
        set(_changed TRUE)
      endif()
    endforeach()
    if(_changed)
      list(REMOVE_DUPLICATES _fixed)
      message(STATUS "vision_factory: ${_target} include folders -> ${_fixed}")
      set_target_properties(${_target} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_fixed}")
    endif()
  endforeach()
endfunction()

cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL _vision_factory_fix_wheel_include_dirs)
