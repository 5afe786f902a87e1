% Pattern: a public repository's model file for road-surface classification from phone motion
% sensors: a function file `net = attention(num_channels, dataset_train);` (with the stray
% semicolon after the signature) stacking 1-D convolutions (Padding=4 on the first, then 1),
% batch normalisation, selfAttentionLayer(8, 48), global average pooling and two fully connected
% layers, trained with trainnet on a struct's fields.
% Source: GitHub repository (one of several model files a k-fold driver calls).
% MATLAB: called with its arguments the network is clean, 16 layers; analysed on its own the
% input size num_channels is an argument nobody gave. With num_channels = 6: conv 3*6*16 + 16 =
% 304, conv 3*16*32 + 32 = 1,568, batchnorm 64, conv 3*32*48 + 48 = 4,656, batchnorm 96,
% selfAttention(8, 48) on 48 channels 4*(48*48 + 48) = 9,408, fc(64) 3,136, fc(5) 325: 19,557.
% Expect: exit 2 "--set num_channels=VALUE"
% Expect-with: --set num_channels=6 -> exit 0 "16 layers" "no issues" learnables=19557
function net = attention(num_channels, dataset_train);
	layers = [
		sequenceInputLayer(num_channels)

		convolution1dLayer(3, 16, Stride=1, Padding=4)
		reluLayer

		convolution1dLayer(3, 32, Stride=1, Padding=1)
		batchNormalizationLayer
		reluLayer

		convolution1dLayer(3, 48, Stride=1, Padding=1)
		batchNormalizationLayer
		reluLayer

		selfAttentionLayer(8, 48)
		reluLayer

		globalAveragePooling1dLayer

		fullyConnectedLayer(64)
		reluLayer

		fullyConnectedLayer(5)
		softmaxLayer
		];

	options = trainingOptions('adam', ...
		InitialLearnRate=0.001, ...
		MaxEpochs=37, ...
		MiniBatchSize=16, ...
		Shuffle='every-epoch', ...
		L2Regularization=1e-4, ...
		LearnRateSchedule='piecewise', ...
		LearnRateDropPeriod=15, ...
		LearnRateDropFactor=0.5, ...
		Verbose=false);

	net = trainnet(dataset_train.sequences, dataset_train.labels, layers, 'crossentropy', options);
end
