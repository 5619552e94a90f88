#!/usr/bin/env python3
"""remote_s3_setup.py: prepares the S3-compatible server of tests/integration/remote_s3.sh (moto's server mode,
started with INITIAL_NO_AUTH_ACTION_COUNT so that its signature checks are on after the first requests): an IAM user
with an access key allowed s3:*, session credentials of a role it assumes (STS), a bucket and the local files uploaded under
their names. Usage: remote_s3_setup.py ENDPOINT BUCKET DIR... ; prints "KEY SECRET TOKEN_KEY TOKEN_SECRET TOKEN"."""
import json
import os
import sys

import boto3
from botocore.config import Config

endpoint, bucket, dirs = sys.argv[1], sys.argv[2], sys.argv[3:]
cfg = Config(retries={"max_attempts": 1}, s3={"addressing_style": "path"})
anon = dict(endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="setup", aws_secret_access_key="setup",
            config=cfg)
iam = boto3.client("iam", **anon)  # the first requests: before the server checks signatures
iam.create_user(UserName="sluice")
key = iam.create_access_key(UserName="sluice")["AccessKey"]
iam.put_user_policy(UserName="sluice", PolicyName="s3", PolicyDocument=json.dumps(
    {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": ["s3:*", "sts:*", "iam:*"], "Resource": "*"}]}))
auth = dict(endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id=key["AccessKeyId"],
            aws_secret_access_key=key["SecretAccessKey"], config=cfg)
s3 = boto3.client("s3", **auth)
s3.create_bucket(Bucket=bucket)
for d in dirs:
    base = os.path.basename(d.rstrip("/"))
    for name in sorted(os.listdir(d)):
        s3.upload_file(os.path.join(d, name), bucket, "%s/%s" % (base, name))
# session credentials moto's access control knows: those of a role the user assumes, allowed s3:*
iam_auth = boto3.client("iam", **auth)
role = iam_auth.create_role(RoleName="reader", AssumeRolePolicyDocument=json.dumps(
    {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}]}))
iam_auth.put_role_policy(RoleName="reader", PolicyName="s3", PolicyDocument=json.dumps(
    {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": ["s3:*"], "Resource": "*"}]}))
tok = boto3.client("sts", **auth).assume_role(RoleArn=role["Role"]["Arn"], RoleSessionName="sluice-test")["Credentials"]
print(key["AccessKeyId"], key["SecretAccessKey"], tok["AccessKeyId"], tok["SecretAccessKey"], tok["SessionToken"])
