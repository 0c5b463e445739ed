<?php
header("Content-Type: text/plain");
echo str_repeat("dynamic!", 131072);
