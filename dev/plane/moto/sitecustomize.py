# Loaded by the Python interpreter that runs moto_server for the local plane
# (the plane puts this folder first on PYTHONPATH): fixes one moto 5.2.1 bug
# that the aws backend's machine pools meet, and nothing else.
#
# CreateLaunchTemplate decodes a template's user data into moto's
# Base64EncodedString; CreateLaunchTemplateVersion stores it as it came, and
# every auto scaling group launched from such a version then fails (HTTP 500,
# an AssertionError in moto). provider-upjet-aws makes a second version right
# after the first because moto also echoes the template's own tags into the
# first version's tag specifications, which AWS does not.
from moto.ec2.models import launch_templates as _launch_templates
from moto.ec2.utils import parse_user_data as _parse_user_data

_create_version = _launch_templates.LaunchTemplate.create_version


def _create_version_with_decoded_user_data(self, data, description):
    user_data = data.get("UserData")
    if isinstance(user_data, (str, bytes)):
        data = dict(data, UserData=_parse_user_data(user_data))
    return _create_version(self, data, description)


_launch_templates.LaunchTemplate.create_version = _create_version_with_decoded_user_data
